import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkLayering, mermaidDiagram, readSources, type SourceFile, srcDir } from './import-graph.js';

describe('the import graph of src/', () => {
  const files = readSources(srcDir);

  it('has no upward import, no import past a folder index.ts, no cycle between folders', () => {
    expect(files.length).toBeGreaterThan(100);
    expect(checkLayering(files).map((violation) => violation.message)).toEqual([]);
  });

  it('is the one docs/architecture.md draws', () => {
    const doc = readFileSync(join(srcDir, '..', 'docs', 'architecture.md'), 'utf8');
    // Regenerate with: npx tsx test/layering/import-graph.ts
    expect(doc).toContain(`\`\`\`mermaid\n${mermaidDiagram(files)}\n\`\`\``);
  });
});

describe('the layering check', () => {
  const file = (path: string, text = ''): SourceFile => ({ path, text });

  it('reports an upward import, naming both files and layers', () => {
    const violations = checkLayering([
      file('store/index.ts'),
      file('store/store.ts', "import { runEngage } from '../engage/index.js';"),
      file('engage/index.ts'),
    ]);
    expect(violations).toEqual([
      { kind: 'upward', message: 'store/store.ts (L1 store) imports engage/index.ts (L3 engage)' },
    ]);
  });

  it('counts type-only imports, re-exports and dynamic imports, not lookalikes in comments', () => {
    const violations = checkLayering([
      file('util/index.ts'),
      file(
        'util/a.ts',
        [
          "import type { Bus } from '../bus/index.js';",
          "export { createStore } from '../store/index.js';",
          "const later = () => import('../model/index.js');",
          "// import { x } from '../engage/index.js';",
          'const text = "import \'../chat/index.js\'";',
        ].join('\n'),
      ),
      file('bus/index.ts'),
      file('store/index.ts'),
      file('model/index.ts'),
    ]);
    expect(violations.map((violation) => violation.message)).toEqual([
      'util/a.ts (L0 util) imports bus/index.ts (L1 bus)',
      'util/a.ts (L0 util) imports store/index.ts (L1 store)',
      'util/a.ts (L0 util) imports model/index.ts (L1 model)',
    ]);
  });

  it("reports an import that reaches past a folder's index.ts, and treats runtime.ts as runtime/'s entry", () => {
    const violations = checkLayering([
      file('util/index.ts'),
      file('util/errors.ts'),
      file('bus/bus.ts', "import { ErrorCodes } from '../util/errors.js';"),
      file('runtime.ts'),
      file('runtime/state-dir.ts'),
      file('cli/main.ts', "import { a } from '../runtime.js';\nimport { b } from '../runtime/state-dir.js';"),
    ]);
    expect(violations).toEqual([
      { kind: 'bypasses-index', message: 'bus/bus.ts imports util/errors.ts instead of util/index.ts' },
      { kind: 'bypasses-index', message: 'cli/main.ts imports runtime/state-dir.ts instead of runtime.ts' },
    ]);
  });

  it('lets a declare-module block merge into bus/events.ts, and still layers it', () => {
    const violations = checkLayering([
      file('bus/index.ts'),
      file('bus/events.ts'),
      file('work/index.ts', "declare module '../bus/events.js' {\n  interface BusEventMap {}\n}"),
      file('util/index.ts', "declare module '../bus/events.js' {\n  interface BusEventMap {}\n}"),
    ]);
    expect(violations).toEqual([
      { kind: 'upward', message: 'util/index.ts (L0 util) imports bus/events.ts (L1 bus)' },
    ]);
  });

  it('reports folders importing each other, and a folder missing from the layer table', () => {
    const violations = checkLayering([
      file('work/index.ts', "import { a } from '../agents/index.js';"),
      file('agents/index.ts', "import { b } from '../work/index.js';"),
      file('newthing/index.ts'),
    ]);
    expect(violations.map((violation) => violation.kind).sort()).toEqual(['cycle', 'unknown-unit']);
    expect(violations.find((violation) => violation.kind === 'cycle')?.message).toBe(
      'units import each other: agents → work → agents',
    );
  });
});
