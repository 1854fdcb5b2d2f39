// Interleaved A/B of a durable workflow run between builds of agentd: a chain of pure functions (3 nodes, or
// `--nodes N`) on a SQLite store (WAL, synchronous=NORMAL, as agentd runs it) in a temporary directory, from each tree's dist/.
// Each round starts one process per tree (the order reversed every other round), which warms up for 2 s and
// then times 10 batches of 200 runs one after another: the median µs of wall time and of CPU time a run. A
// process of its own per round and tree, so no tree's garbage, JIT state or page cache meets another's. Not a
// benchmark module (`npm run bench` does not run it); the trees need dist/ built (see bench/chat-turn-ab.ts for
// a worktree of an older revision):
//   npx tsx bench/workflow-durable-ab.ts /tmp/before . [--rounds 5] [--nodes 3]
import { takeFlag } from './args.js';
import { printBatchMedians, runChildProcessAB, timeBatch } from './tree-ab.js';
import { openDurableChain } from './workflow-chain.js';

// The children are started with `--child <tree>` alone: the chain's length reaches them in the environment.
const nodesFlag = takeFlag(process.argv, '--nodes');
if (nodesFlag !== undefined) process.env.AGENTD_AB_CHAIN_NODES = nodesFlag;
const nodeCount = Number(process.env.AGENTD_AB_CHAIN_NODES ?? 3);
if (!Number.isInteger(nodeCount) || nodeCount < 1) throw new Error('--nodes takes a whole number above 0');

/** In a child: times the durable chain of `tree` and prints `{ wallUs, cpuUs }` a run. */
async function measureTree(tree: string): Promise<void> {
  const chain = await openDurableChain(tree, nodeCount);
  try {
    await printBatchMedians(chain.run, {
      warmUp: async () => {
        const warmUntil = Date.now() + 2_000;
        while (Date.now() < warmUntil) await timeBatch(chain.run, 50);
      },
      batches: 10,
      perBatch: 200,
    });
  } finally {
    await chain.close();
  }
}

await runChildProcessAB({
  script: new URL(import.meta.url).pathname,
  usage: 'workflow-durable-ab <tree> <tree> [...] [--rounds 5] [--nodes 3]',
  defaultRounds: 5,
  measure: measureTree,
  titles: {
    wall: `Durable ${nodeCount}-node chain on SQLite, wall time a run:`,
    cpu: 'CPU time a run:',
    unit: 'µs a run',
  },
});
