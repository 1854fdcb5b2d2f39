// Interleaved A/B of a work submission between builds of agentd: submissions without a key into a
// SQLite store (WAL, synchronous=NORMAL, as agentd runs it) in a temporary directory, from each tree's dist/,
// one after another (one commit each). Each round starts one process per tree (the order reversed every
// other round), which submits 1,000 items to warm up and then times 10 batches of 500: the median µs of
// wall time and of CPU time a submission. A process of its own per round and tree, as in
// bench/workflow-durable-ab.ts. Not a benchmark module (`npm run bench` does not run it); the trees need
// dist/ built (see bench/chat-turn-ab.ts for a worktree of an older revision):
//   npx tsx bench/work-submit-ab.ts /tmp/before . [--rounds 6]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { takeFlag } from './args.js';
import { interleavedRounds, printTreeTable, treesFrom } from './tree-ab.js';

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** In a child: times `tree`'s submissions and prints `{ wallUs, cpuUs }` a submission. */
async function measureTree(tree: string): Promise<void> {
  const load = (path: string) => import(pathToFileURL(join(tree, 'dist', path)).href);
  const { createStore } = await load('store/index.js');
  const { createWorkQueue } = await load('work/index.js');
  const dir = mkdtempSync(join(tmpdir(), 'agentd-submit-ab-'));
  try {
    const store = await createStore({ stateDir: dir });
    const queue = createWorkQueue({ db: store.db });
    let next = 0;
    const batch = async (submissions: number) => {
      const startedAt = performance.now();
      const cpu = process.cpuUsage();
      for (let index = 0; index < submissions; index++)
        await queue.submit({ kind: 'task', description: `job ${next++}` });
      const used = process.cpuUsage(cpu);
      return {
        wallUs: ((performance.now() - startedAt) * 1000) / submissions,
        cpuUs: (used.user + used.system) / submissions,
      };
    };
    await batch(1_000);
    const batches = [];
    for (let index = 0; index < 10; index++) batches.push(await batch(500));
    console.log(
      JSON.stringify({
        wallUs: median(batches.map((one) => one.wallUs)),
        cpuUs: median(batches.map((one) => one.cpuUs)),
      }),
    );
    await queue.close();
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const args = process.argv.slice(2);
const child = takeFlag(args, '--child');
if (child) {
  await measureTree(child);
} else {
  const rounds = Number(takeFlag(args, '--rounds') ?? 6);
  const trees = treesFrom(args, 'work-submit-ab <tree> <tree> [...] [--rounds 6]');
  const cpu: number[][] = trees.map(() => []);
  const wall = await interleavedRounds(trees.length, rounds, async (position) => {
    const output = execFileSync(
      process.execPath,
      ['--import', 'tsx', new URL(import.meta.url).pathname, '--child', trees[position]!],
      { encoding: 'utf8' },
    );
    const figures = JSON.parse(output.trim().split('\n').at(-1)!) as { wallUs: number; cpuUs: number };
    cpu[position]!.push(figures.cpuUs);
    return figures.wallUs;
  });
  console.log('A work submission without a key on SQLite, wall time:\n');
  printTreeTable(trees, wall, 'µs a submission', 1);
  console.log('\nCPU time:\n');
  printTreeTable(trees, cpu, 'µs a submission', 1);
}
