// Installs bench/'s peer frameworks (LangGraph, Mastra, OpenAI Agents, pg-boss, …) before a benchmark run,
// only when bench/package-lock.json is newer than the last install: they are not the package's deps. Then
// compiles src/ into dist/ when dist/ is older: the servers of the benchmarks run the compiled package.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const bench = join(import.meta.dirname, '..', 'bench');
// npm writes this hidden lockfile at the end of every install.
const installed = join(bench, 'node_modules', '.package-lock.json');
const upToDate =
  existsSync(installed) && statSync(installed).mtimeMs >= statSync(join(bench, 'package-lock.json')).mtimeMs;
if (!upToDate) {
  const result = spawnSync('npm', ['ci', '--prefix', bench, '--no-audit', '--no-fund'], { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

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
