import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempHome } from '../runtime/helpers.js';
import { runCli as run } from './helpers.js';

const root = join(import.meta.dirname, '..', '..');

describe('exit codes as docs/cli.md lists them', () => {
  it('2 with NOT_FOUND for an unknown work item, in work show and ledger show alike', async () => {
    const home = tempHome('agentd-exit-');
    for (const args of [
      ['work', 'show', 'work_nope'],
      ['ledger', 'show', 'work_nope'],
    ]) {
      const result = await run(['--home', home, ...args, '--json']);
      expect(JSON.parse(result.out).error.code).toBe('NOT_FOUND');
      expect(result.code).toBe(2);
    }
  });

  it('3 when the gateway at --url cannot be reached, with the reason on stderr', async () => {
    const result = await run(['status', '--url', 'ws://127.0.0.1:9']);
    expect(result.err).toMatch(/^agentd: cannot reach ws:\/\/127\.0\.0\.1:9.*\(GATEWAY_UNREACHABLE\)\n$/);
    expect(result.code).toBe(3);
  });

  it('3 from the workflow commands too when the gateway at --url cannot be reached', async () => {
    for (const args of [
      ['run', 'examples/mini-editor'],
      ['eval', 'examples/mini-editor'],
      ['inspect', 'wf_nope'],
    ]) {
      const result = await run([...args, '--url', 'ws://127.0.0.1:9']);
      expect(result.err).toMatch(/\(GATEWAY_UNREACHABLE\)\n$/);
      expect(result.code).toBe(3);
    }
  });

  it('2 for a bad option value', async () => {
    const result = await run(['--log-level', 'loud', 'status']);
    expect(result.err).toContain('--log-level must be one of');
    expect(result.code).toBe(2);
  });
});

describe('output into a pipe that closes early', () => {
  it('ends quietly with exit 0, like `agentd work list | head -1`', async () => {
    const home = tempHome('agentd-epipe-');
    for (let i = 0; i < 3; i++) await run(['--home', home, 'work', 'submit', 'task', `item ${i}`]);
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(root, 'src/cli/bin.ts'), '--home', home, 'work', 'list', '--json'],
      { cwd: root, env: { ...process.env, AGENTD_LOG_LEVEL: 'silent' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let err = '';
    child.stderr.on('data', (chunk) => {
      err += String(chunk);
    });
    // Like `head -1` once it has its line: the reading end is gone before agentd writes (so the write
    // fails with EPIPE whatever the size of the output).
    child.stdout.destroy();
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(err).not.toMatch(/EPIPE|Error|at /);
    expect(code).toBe(0);
  }, 30_000);
});
