// Interleaved A/B of a work submission between builds of agentd: submissions without a key into a
// SQLite store (WAL, synchronous=NORMAL, as agentd runs it) in a temporary directory, from each tree's dist/,
// one after another (one commit each). Each round starts one process per tree (the order reversed every
// other round), which submits 1,000 items to warm up and then times 10 batches of 500: the median µs of
// wall time and of CPU time a submission. A process of its own per round and tree, as in
// bench/workflow-durable-ab.ts. Not a benchmark module (`npm run bench` does not run it); the trees need
// dist/ built (see bench/chat-turn-ab.ts for a worktree of an older revision):
//   npx tsx bench/work-submit-ab.ts /tmp/before . [--rounds 6]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { printBatchMedians, runChildProcessAB } from './tree-ab.js';

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
    const submit = () => queue.submit({ kind: 'task', description: `job ${next++}` });
    await printBatchMedians(submit, {
      warmUp: async () => {
        for (let index = 0; index < 1_000; index++) await submit();
      },
      batches: 10,
      perBatch: 500,
    });
    await queue.close();
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await runChildProcessAB({
  script: new URL(import.meta.url).pathname,
  usage: 'work-submit-ab <tree> <tree> [...] [--rounds 6]',
  defaultRounds: 6,
  measure: measureTree,
  titles: {
    wall: 'A work submission without a key on SQLite, wall time:',
    cpu: 'CPU time:',
    unit: 'µs a submission',
  },
});
