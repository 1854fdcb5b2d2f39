import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { loadWorkflow } from '../../src/workflow/index.js';
import { startRuntime, tempHome } from '../runtime/helpers.js';

const example = join(import.meta.dirname, '..', '..', 'examples', 'mini-editor');

/** A module that proves it ran by writing a marker file when imported. */
function sideEffectModule(marker: string): string {
  return `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(marker)}, 'imported');\nexport function normalizeRequest() { return {}; }\nexport function writeDocument() { return {}; }\n`;
}

/** The example workflow with its first tool's module replaced by `entrypoint`. */
function workflowWithEntrypoint(root: string, entrypoint: string): string {
  const dir = join(root, 'flow');
  cpSync(example, dir, { recursive: true });
  const tools = readFileSync(join(dir, 'tools.yaml'), 'utf8');
  writeFileSync(join(dir, 'tools.yaml'), tools.replace('./tools.mjs#normalizeRequest', entrypoint));
  return dir;
}

async function validate(dir: string): Promise<{ code: number; out: string }> {
  let out = '';
  const io = { stdout: (text: string) => (out += text), stderr: (text: string) => (out += text) };
  const code = await main(
    ['node', 'agentd', '--home', tempHome(), 'workflow', 'validate', dir, '--json'],
    io,
  );
  return { code, out };
}

describe('attack: workflow manifests that load code from anywhere', () => {
  it('tool modules outside the workflow directory are refused and never imported', async () => {
    const root = mkdtempSync(join(tmpdir(), 'agentd-sec-wf-'));
    const marker = join(root, 'evil-ran');
    writeFileSync(join(root, 'evil.mjs'), sideEffectModule(marker));
    const cases = {
      parent: '../evil.mjs#normalizeRequest',
      absolute: `${join(root, 'evil.mjs')}#normalizeRequest`,
      symlink: './linked.mjs#normalizeRequest',
    };
    for (const [name, entrypoint] of Object.entries(cases)) {
      const caseRoot = join(root, name);
      mkdirSync(caseRoot);
      const dir = workflowWithEntrypoint(caseRoot, entrypoint);
      if (name === 'symlink') symlinkSync(join(root, 'evil.mjs'), join(dir, 'linked.mjs'));
      // Through the CLI's validate…
      const validated = await validate(dir);
      expect(validated.code, name).toBe(2);
      expect(JSON.parse(validated.out).issues[0].message, name).toMatch(
        /relative to the workflow directory|inside the workflow directory/,
      );
      // …and through a real load, as `agentd run` and the gateway do.
      await expect(loadWorkflow(dir), name).rejects.toMatchObject({
        issues: [expect.objectContaining({ rule: 'tools-load' })],
      });
    }
    expect(existsSync(marker)).toBe(false);
  });

  it('validate checks modules without importing them', async () => {
    const root = mkdtempSync(join(tmpdir(), 'agentd-sec-wf-'));
    const marker = join(root, 'validate-ran-code');
    const dir = workflowWithEntrypoint(root, './tools.mjs#normalizeRequest');
    writeFileSync(join(dir, 'tools.mjs'), sideEffectModule(marker));
    const validated = await validate(dir);
    expect(validated.code).toBe(0);
    expect(JSON.parse(validated.out).valid).toBe(true);
    expect(existsSync(marker)).toBe(false);
    // A missing module is still reported.
    writeFileSync(
      join(dir, 'tools.yaml'),
      readFileSync(join(dir, 'tools.yaml'), 'utf8').replace('./tools.mjs#writeDocument', './gone.mjs'),
    );
    const missing = await validate(dir);
    expect(missing.code).toBe(2);
    expect(existsSync(marker)).toBe(false);
  });

  it('the gateway runs workflows from its configured directories only', async () => {
    const home = tempHome('agentd-sec-wf-');
    const outside = mkdtempSync(join(tmpdir(), 'agentd-sec-wf-out-'));
    cpSync(example, join(outside, 'flow'), { recursive: true });
    const library = join(home, 'library');
    mkdirSync(library);
    writeFileSync(join(home, 'agentd.yaml'), 'workflows:\n  dirs: [library]\n');
    // A link inside the library that leads to the outside copy.
    symlinkSync(join(outside, 'flow'), join(library, 'linked'));
    const started = await startRuntime({ home });
    const client = await started.connect();
    try {
      for (const dir of [join(outside, 'flow'), join(library, 'linked'), '../', join(home, 'workspace')]) {
        await expect(client.call('workflow.run', { dir }), dir).rejects.toMatchObject({ code: 'FORBIDDEN' });
      }
    } finally {
      await client.close();
      await started.runtime.close();
    }
  });
});
