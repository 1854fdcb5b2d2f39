import { spawn } from 'node:child_process';
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Runtime } from '../../src/runtime.js';
import { createStore } from '../../src/store/index.js';
import { createScriptedModel } from '../../src/testing.js';
import { startRuntime, tempHome } from '../runtime/helpers.js';

const repoRoot = join(import.meta.dirname, '..', '..');
const modeOf = (path: string) => statSync(path).mode & 0o777;

describe('the state directory and database files', () => {
  let runtime: Runtime | undefined;
  afterEach(async () => {
    await runtime?.close();
    runtime = undefined;
  });

  it('are private to the owner: directory 0700, database, WAL, shared memory and token 0600', async () => {
    const home = join(tempHome('agentd-modes-'), 'state');
    const started = await startRuntime({ home, model: createScriptedModel({ steps: [{ text: 'ok' }] }) });
    runtime = started.runtime;
    await runtime.sendMessage({ text: 'write something' });
    expect(modeOf(home)).toBe(0o700);
    for (const file of ['agentd.db', 'agentd.db-wal', 'agentd.db-shm', 'token'])
      expect([file, modeOf(join(home, file))]).toEqual([file, 0o600]);
  });

  it('refuses to open SQLite, loudly, when its shared-memory file cannot be written', async () => {
    const home = tempHome('agentd-shm-');
    mkdirSync(join(home, 'agentd.db-shm'));
    await expect(createStore({ stateDir: home })).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringMatching(/agentd\.db-shm.*SIGBUS/),
    });
  });

  it('refuses to start on a file system without room for the shared-memory file', async () => {
    await expect(
      createStore({ stateDir: tempHome('agentd-full-'), freeBytes: () => 4096 }),
    ).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringMatching(/only 4096 bytes are free.*SIGBUS/),
    });
  });

  it('makes `agentd serve` exit non-zero with the reason instead of dying of SIGBUS', async () => {
    const home = tempHome('agentd-shm-cli-');
    mkdirSync(join(home, 'agentd.db-shm'));
    // The built CLI, as an operator runs it (.ci/run builds before the tests).
    const child = spawn(process.execPath, ['bin/agentd.js', 'serve', '--port', '0'], {
      cwd: repoRoot,
      env: { ...process.env, AGENTD_HOME: home, AGENTD_LOG_LEVEL: 'warn', AGENTD_MODEL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += String(chunk);
    });
    child.stderr.on('data', (chunk) => {
      output += String(chunk);
    });
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.once('exit', (exitCode, exitSignal) => resolve([exitCode, exitSignal])),
    );
    expect(signal).toBeNull();
    expect(code).not.toBe(0);
    expect(output).toMatch(/STORE_UNAVAILABLE|agentd\.db-shm/);
    expect(output).toContain('SIGBUS');
  });
});
