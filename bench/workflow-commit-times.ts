// Where a durable workflow run's commit time goes: each COMMIT of a durable chain (bench/workflow-chain.ts) timed
// on its own, wall and CPU. Most commits append a run's row to the WAL; the one that brings the WAL past the
// store's autocheckpoint also copies the changed pages into the database file and syncs it, and waits for the
// disk. The report splits the commits at 1 ms: how often the long ones come and what they add to every run.
// The COMMIT statements are found by wrapping the tree's better-sqlite3 `prepare` before the store opens
// (bench/statement-hooks.ts);
// CPU is the process's (all threads: Node's thread pool syncs the WAL in the background meanwhile).
// A diagnostic, not a benchmark module (`npm run bench` does not run it); the tree needs dist/ built:
//   npx tsx bench/workflow-commit-times.ts [tree] [--nodes 3] [--runs 20000] [--warmup-ms 3000]
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { takeFlag } from './args.js';
import { aroundStatements, type DriverPrototype } from './statement-hooks.js';
import { percentile } from './stats.js';
import { openDurableChain } from './workflow-chain.js';

const args = process.argv.slice(2);
const nodeCount = Number(takeFlag(args, '--nodes') ?? 3);
const runCount = Number(takeFlag(args, '--runs') ?? 20_000);
const warmupMs = Number(takeFlag(args, '--warmup-ms') ?? 3_000);
const tree = resolve(args[0] ?? '.');
const longCommitUs = 1_000;

const commitWallUs: number[] = [];
const commitCpuUs: number[] = [];
let timing = false;
const driver = createRequire(join(tree, 'package.json'))('better-sqlite3') as { prototype: DriverPrototype };
aroundStatements(
  driver.prototype,
  (_sql, commit) => {
    if (!timing) return commit();
    const cpu = process.cpuUsage();
    const startedAt = performance.now();
    try {
      return commit();
    } finally {
      commitWallUs.push((performance.now() - startedAt) * 1000);
      const used = process.cpuUsage(cpu);
      commitCpuUs.push(used.user + used.system);
    }
  },
  (sql) => /^\s*COMMIT\b/i.test(sql),
);

const chain = await openDurableChain(tree, nodeCount);
try {
  const warmUntil = Date.now() + warmupMs;
  while (Date.now() < warmUntil) await chain.run();
  timing = true;
  const cpu = process.cpuUsage();
  const startedAt = performance.now();
  for (let index = 0; index < runCount; index++) await chain.run();
  const wallUs = ((performance.now() - startedAt) * 1000) / runCount;
  const used = process.cpuUsage(cpu);
  timing = false;

  const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
  const commitsWall = sum(commitWallUs);
  const long = commitWallUs.flatMap((us, index) => (us > longCommitUs ? [index] : []));
  const longWall = sum(long.map((index) => commitWallUs[index]!));
  const longCpu = sum(long.map((index) => commitCpuUs[index]!));
  const sorted = [...commitWallUs].sort((a, b) => a - b);
  const perRun = (us: number) => (us / runCount).toFixed(1);
  console.log(`Durable ${nodeCount}-node chain, ${runCount} runs after ${warmupMs} ms, tree ${tree}\n`);
  console.log('| | µs a run |');
  console.log('| --- | ---: |');
  console.log(`| the run, wall | ${wallUs.toFixed(1)} |`);
  console.log(`| the run, CPU | ${perRun(used.user + used.system)} |`);
  console.log(`| its commits, wall | ${perRun(commitsWall)} |`);
  console.log(`| its commits, CPU | ${perRun(sum(commitCpuUs))} |`);
  console.log(`| commits over ${longCommitUs / 1000} ms, wall | ${perRun(longWall)} |`);
  console.log(`| commits over ${longCommitUs / 1000} ms, CPU | ${perRun(longCpu)} |`);
  console.log(
    `\n${commitWallUs.length} commits: p50 ${percentile(sorted, 50).toFixed(1)} µs, p99 ${percentile(sorted, 99).toFixed(1)}, ` +
      `mean ${(commitsWall / commitWallUs.length).toFixed(1)}; ${long.length} over ${longCommitUs / 1000} ms ` +
      `(one in ${Math.round(commitWallUs.length / Math.max(1, long.length))}), ${((longWall / commitsWall) * 100).toFixed(0)} % of the commits' wall time, ` +
      `the longest ${(sorted.at(-1)! / 1000).toFixed(1)} ms`,
  );
} finally {
  await chain.close();
}
