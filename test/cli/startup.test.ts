import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { skillProposalStatuses } from '../../src/skills/index.js';
import { workStates } from '../../src/work/index.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Runs the CLI from source in a process of its own, with a module hook that reports every file of the
 * repository's `src/` it loads: which subsystems a command starts with.
 */
function runWithModules(args: string[]): { status: number | null; stdout: string; modules: string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-cli-startup-'));
  writeFileSync(
    join(dir, 'hooks.mjs'),
    `export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (resolved.url.startsWith('file:')) process.stderr.write('LOADED ' + resolved.url + '\\n');
  return resolved;
}
`,
  );
  writeFileSync(
    join(dir, 'register.mjs'),
    "import { register } from 'node:module';\nregister('./hooks.mjs', import.meta.url);\n",
  );
  const result = spawnSync(
    process.execPath,
    ['--import', 'tsx', '--import', join(dir, 'register.mjs'), 'src/cli/bin.ts', '--home', dir, ...args],
    { cwd: repoRoot, encoding: 'utf8', timeout: 60_000, env: { ...process.env, AGENTD_LOG_LEVEL: 'silent' } },
  );
  const modules = [
    ...new Set(
      result.stderr
        .split('\n')
        .filter((line) => line.startsWith('LOADED file:'))
        .map((line) => relative(repoRoot, fileURLToPath(line.slice('LOADED '.length))))
        .filter((path) => path.startsWith('src/')),
    ),
  ];
  return { status: result.status, stdout: result.stdout, modules };
}

const loadedFolders = (modules: string[]) =>
  new Set(modules.map((path) => path.split('/').slice(0, 2).join('/').replace(/\.ts$/, '')));

describe('the CLI starts without the runtime', () => {
  it('prints its version with no subsystem loaded', () => {
    const { status, stdout, modules } = runWithModules(['--version']);
    expect(status).toBe(0);
    expect(stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    // The hook saw the CLI itself: the check below is about what it left out.
    expect(modules).toContain('src/cli/main.ts');
    const folders = loadedFolders(modules);
    for (const heavy of ['src/runtime', 'src/store', 'src/memory', 'src/work', 'src/workflow', 'src/model'])
      expect(folders.has(heavy), `${heavy} loaded`).toBe(false);
  });

  it.each([
    ['work', 'list', '--help'],
    ['work', 'help', 'list'],
  ])(
    "lists the work states in `%s %s %s`, loading the work queue's module but not the runtime",
    (...args) => {
      const { status, stdout, modules } = runWithModules(args);
      expect(status).toBe(0);
      expect(stdout.replace(/\s+/g, ' ')).toContain(`comma-separated: ${workStates.join(', ')}`);
      const folders = loadedFolders(modules);
      expect(folders.has('src/work')).toBe(true);
      expect(folders.has('src/runtime')).toBe(false);
    },
  );

  it('loads no work module for a work command over --url that prints no help', () => {
    // Nothing listens on port 9: the command fails to connect, after deciding what to load.
    const { status, modules } = runWithModules(['work', 'list', '--url', 'ws://127.0.0.1:9', '--token', 't']);
    expect(status).not.toBe(0);
    expect(modules).toContain('src/cli/gateway-client.ts');
    const folders = loadedFolders(modules);
    expect(folders.has('src/work')).toBe(false);
    expect(folders.has('src/runtime')).toBe(false);
  });

  it('lists the proposal statuses in `skills proposals --help`', () => {
    const { status, stdout, modules } = runWithModules(['skills', 'proposals', '--help']);
    expect(status).toBe(0);
    expect(stdout.replace(/\s+/g, ' ')).toContain(`only one status: ${skillProposalStatuses.join(', ')}`);
    expect(loadedFolders(modules).has('src/runtime')).toBe(false);
  });
});
