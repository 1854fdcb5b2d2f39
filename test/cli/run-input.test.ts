import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');

/** Runs the CLI from source in `cwd`, as a user would from any directory. */
async function agentd(cwd: string, args: string[]) {
  const child = spawn(
    process.execPath,
    ['--import', import.meta.resolve('tsx'), join(root, 'src/cli/bin.ts'), ...args],
    {
      cwd,
      env: { ...process.env, AGENTD_LOG_LEVEL: 'silent', AGENTD_MODEL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk) => {
    out += String(chunk);
  });
  child.stderr.on('data', (chunk) => {
    err += String(chunk);
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, out, err };
}

describe('agentd run --input', () => {
  it('takes plain text as the request and writes the workflow files into the current directory', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'agentd-run-'));
    const result = await agentd(cwd, [
      '--home',
      join(cwd, '.agentd'),
      'run',
      join(root, 'examples', 'mini-editor'),
      '--input',
      'Create a note about tide pools',
      '--quiet',
    ]);
    expect(result.err).not.toContain('TOOL_MISUSE');
    expect(result.out).toMatch(/^\[success\] task \S+/);
    expect(result.code).toBe(0);
    const document = join(cwd, 'documents', 'tide-pools.md');
    expect(existsSync(document)).toBe(true);
    expect(readFileSync(document, 'utf8').toLowerCase()).toContain('tide pools');
  }, 60_000);
});
