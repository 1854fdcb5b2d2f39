import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Runtime } from '../../src/runtime.js';
import { startRuntime } from '../runtime/helpers.js';
import { runCli as run } from './helpers.js';

const example = join(import.meta.dirname, '..', '..', 'examples', 'mini-editor');

let runtime: Runtime | undefined;
afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
});

describe('agentd inspect --url', () => {
  it("shows a run of a running server's workflows, and NOT_FOUND for an unknown task", async () => {
    const started = await startRuntime();
    runtime = started.runtime;
    const dir = join(started.runtime.state.home, 'workflow-library', 'mini-editor');
    cpSync(example, dir, { recursive: true });
    const client = await started.connect();
    const { taskId } = await client.call<{ taskId: string }>(
      'workflow.run',
      { dir, input: { request: 'Create a note about tide pools' } },
      { timeoutMs: 60_000 },
    );
    await client.close();
    const remote = ['--url', started.url, '--token', started.runtime.state.token];

    const shown = await run(['inspect', taskId, ...remote, '--json']);
    // What went wrong, should it fail: an exit 2 ("gateway token mismatch" once) was seen twice under full-suite load.
    expect(shown.code, `stderr: ${shown.err}`).toBe(0);
    const report = JSON.parse(shown.out);
    expect(JSON.stringify(report)).toContain(taskId);
    expect(JSON.stringify(report)).toContain('normalize_request');

    const text = await run(['inspect', taskId, ...remote]);
    expect(text.out).toContain('normalize_request');

    const missing = await run(['inspect', 'wft_nope', ...remote, '--json']);
    expect(JSON.parse(missing.out).error.code).toBe('NOT_FOUND');
    expect(missing.code).toBe(2);
  }, 60_000);
});

describe('agentd run --url', () => {
  it("runs a workflow of the server's library there, printing its result, and refuses a directory outside it", async () => {
    const started = await startRuntime();
    runtime = started.runtime;
    const dir = join(started.runtime.state.home, 'workflow-library', 'mini-editor');
    cpSync(example, dir, { recursive: true });
    const remote = ['--url', started.url, '--token', started.runtime.state.token];
    const result = await run(['run', dir, '--input', 'Create a note about tide pools', ...remote, '--json']);
    expect(result.code, `stdout: ${result.out}, stderr: ${result.err}`).toBe(0);
    expect(JSON.parse(result.out)).toMatchObject({ status: 'success', taskId: expect.any(String) });
    // Node progress of this run, from the server's events.
    expect(result.err).toMatch(/▸ start \(start\)\n/);
    expect(result.err).toMatch(/✓ normalize_request \d+ ms\n/);

    const refused = await run(['run', example, ...remote, '--json']);
    expect(JSON.parse(refused.out).error.code).toBe('FORBIDDEN');
    expect(refused.code).toBe(2);
  }, 60_000);
});

describe('agentd eval --url', () => {
  it("runs the evaluation suites of a workflow in the server's library there", async () => {
    const started = await startRuntime();
    runtime = started.runtime;
    const dir = join(started.runtime.state.home, 'workflow-library', 'mini-editor');
    cpSync(example, dir, { recursive: true });
    const remote = ['--url', started.url, '--token', started.runtime.state.token];
    const result = await run(['eval', dir, ...remote, '--json']);
    // What went wrong when nothing came out: once in a CI run, with no cause seen.
    expect(result.out, `stderr: ${result.err}, exit code ${result.code}`).not.toBe('');
    const report = JSON.parse(result.out);
    expect(report.totals.cases).toBeGreaterThan(0);
    expect(report.suites.length).toBeGreaterThan(0);
    expect(result.code).toBe(report.totals.failed > 0 ? 1 : 0);

    const text = await run(['eval', dir, ...remote]);
    expect(text.out).toMatch(/total: \d+\/\d+ passed/);
    // The cases' node progress, from the server's events.
    expect(text.err).toMatch(/✓ normalize_request \d+ ms\n/);

    const refused = await run(['eval', example, ...remote, '--json']);
    expect(JSON.parse(refused.out).error.code).toBe('FORBIDDEN');
    expect(refused.code).toBe(2);
  }, 120_000);
});
