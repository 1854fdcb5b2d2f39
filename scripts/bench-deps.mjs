// Installs bench/'s peer frameworks (LangGraph, Mastra, OpenAI Agents, pg-boss, …) before a benchmark run,
// only when bench/package-lock.json is newer than the last install: they are not the package's deps.
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
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
