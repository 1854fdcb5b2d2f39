import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { configuresAgentd } from '../helpers/agentd-env.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const vitestBin = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs');
const innerTest = "carries none of agentd's settings";

describe('the test suite and the developer shell', () => {
  it(innerTest, () => {
    const leaked = Object.keys(process.env).filter(configuresAgentd);
    expect(leaked).toEqual([]);
  });

  it('runs a test file clean in the shell of the README tour, which exports AGENTD_TOKEN', () => {
    const run = spawnSync(
      process.execPath,
      [vitestBin, 'run', 'test/suite/hermetic-env.test.ts', '-t', innerTest],
      {
        cwd: root,
        encoding: 'utf8',
        env: {
          ...process.env,
          AGENTD_TOKEN: 'from-the-tour',
          AGENTD_URL: 'ws://127.0.0.1:7777',
          AGENTD_HOME: '/nonexistent/agentd-home',
          DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
          OPENAI_API_KEY: 'sk-from-the-shell',
          NO_COLOR: '1',
        },
        timeout: 60_000,
      },
    );
    expect(run.status, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toMatch(/1 passed/);
  });
});
