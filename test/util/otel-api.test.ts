import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

describe('the OpenTelemetry API, loaded once something registers with it', () => {
  it('traces nothing and loads nothing before, and traces with a provider registered later', () => {
    const result = spawnSync(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(new URL('./fixtures/otel-fresh-process.ts', import.meta.url))],
      { cwd: repoRoot, encoding: 'utf8', timeout: 60_000 },
    );
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    const { before, after } = JSON.parse(result.stdout) as {
      before: Record<string, unknown>;
      after: Record<string, unknown>;
    };
    expect(before).toEqual({ apiLoaded: false, api: false, noopSpan: true, traced: false, result: 42 });
    expect(after).toEqual({
      registryExists: true,
      api: true,
      names: ['inner', 'outer', 'under-old-context'],
      innerParentIsOuter: true,
      oldContextSpanIsRoot: true,
    });
  });
});
