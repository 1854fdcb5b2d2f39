// Installs bench/'s peer frameworks (LangGraph, Mastra, OpenAI Agents, pg-boss, …) before a benchmark run,
// only when bench/package-lock.json has changed since the last install: they are not the package's deps. Then
// compiles src/ into dist/ when dist/ is older: the servers of the benchmarks run the compiled package.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readdirSync, readFileSync, realpathSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const bench = join(import.meta.dirname, '..', 'bench');
const modules = join(bench, 'node_modules');
const lockfile = join(bench, 'package-lock.json');
// By content, not time: a fresh checkout (a clone, a git worktree) of the same lockfile is newer than the install.
const lockHash = createHash('sha256').update(readFileSync(lockfile)).digest('hex');
const marker = join(modules, '.installed-lockfile-sha256');
const installedHash = existsSync(marker) ? readFileSync(marker, 'utf8').trim() : undefined;
// npm writes this hidden lockfile at the end of every install; an install from before the marker counts as
// current when it is newer than the lockfile.
const hiddenLockfile = join(modules, '.package-lock.json');
const upToDate =
  installedHash === lockHash ||
  (installedHash === undefined &&
    existsSync(hiddenLockfile) &&
    statSync(hiddenLockfile).mtimeMs >= statSync(lockfile).mtimeMs);
if (!upToDate) {
  if (existsSync(modules) && lstatSync(modules).isSymbolicLink()) {
    // `npm ci` would empty the linked checkout's bench/node_modules and install this lockfile's packages there.
    console.error(
      `bench/node_modules links to ${realpathSync(modules)}, installed from another bench/package-lock.json: ` +
        'install there, or replace the link with an install of its own (npm ci --prefix bench).',
    );
    process.exit(1);
  }
  const result = spawnSync('npm', ['ci', '--prefix', bench, '--no-audit', '--no-fund'], { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
if (installedHash !== lockHash) writeFileSync(marker, `${lockHash}\n`);

const root = join(import.meta.dirname, '..');
const newestMtimeMs = (dir) =>
  readdirSync(dir, { withFileTypes: true }).reduce((newest, entry) => {
    const path = join(dir, entry.name);
    return Math.max(newest, entry.isDirectory() ? newestMtimeMs(path) : statSync(path).mtimeMs);
  }, 0);
const compiled = join(root, 'dist', 'runtime.js');
if (!existsSync(compiled) || newestMtimeMs(join(root, 'src')) > statSync(compiled).mtimeMs) {
  const result = spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
