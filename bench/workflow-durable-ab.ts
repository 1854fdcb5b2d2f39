// Interleaved A/B of a durable workflow run between builds of agentd: a chain of pure functions (3 nodes, or
// `--nodes N`) on a SQLite store (WAL, synchronous=NORMAL, as agentd runs it) in a temporary directory, from each tree's dist/.
// Each round starts one process per tree (the order reversed every other round), which warms up for 2 s and
// then times 10 batches of 200 runs one after another: the median µs of wall time and of CPU time a run. A
// process of its own per round and tree, so no tree's garbage, JIT state or page cache meets another's. Not a
// benchmark module (`npm run bench` does not run it); the trees need dist/ built (see bench/chat-turn-ab.ts for
// a worktree of an older revision):
//   npx tsx bench/workflow-durable-ab.ts /tmp/before . [--rounds 5] [--nodes 3]
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { takeFlag } from './args.js';
import { printBatchMedians, runChildProcessAB, timeBatch } from './tree-ab.js';

// The children are started with `--child <tree>` alone: the chain's length reaches them in the environment.
const nodesFlag = takeFlag(process.argv, '--nodes');
if (nodesFlag !== undefined) process.env.AGENTD_AB_CHAIN_NODES = nodesFlag;
const nodeCount = Number(process.env.AGENTD_AB_CHAIN_NODES ?? 3);
if (!Number.isInteger(nodeCount) || nodeCount < 1) throw new Error('--nodes takes a whole number above 0');
const functionNodes = Array.from({ length: nodeCount }, (_, index) => `n${index + 1}`);
const chain = ['start', ...functionNodes, 'exit'];
const workflowYaml = `version: 1
id: chain
nodes:
${chain
  .map((id, index) => {
    const role = index === 0 ? 'start' : index === chain.length - 1 ? 'exit' : 'linear';
    return `  - { id: ${id}, role: ${role}, kind: deterministic, context: none }`;
  })
  .join('\n')}
edges:
${chain
  .slice(1)
  .map((id, index) => `  - { from: ${chain[index]}, to: ${id} }`)
  .join('\n')}
`;

/** In a child: times the durable chain of `tree` and prints `{ wallUs, cpuUs }` a run. */
async function measureTree(tree: string): Promise<void> {
  const load = (path: string) => import(pathToFileURL(join(tree, 'dist', path)).href);
  const workflows = await load('workflow/index.js');
  const { createStore } = await load('store/index.js');
  const { createBus } = await load('bus/index.js');
  const dir = mkdtempSync(join(tmpdir(), 'agentd-wf-ab-'));
  try {
    const workflowDir = join(dir, 'workflow');
    mkdirSync(workflowDir);
    writeFileSync(join(workflowDir, 'workflow.yaml'), workflowYaml);
    const store = await createStore({ stateDir: dir, bus: createBus() });
    const pass = (input: unknown) => input;
    const engine = await workflows.createWorkflowEngine({
      workflow: await workflows.loadWorkflow(workflowDir),
      database: store.db,
      workDir: workflowDir,
      functions: Object.fromEntries(functionNodes.map((id) => [id, pass])),
    });
    const run = () => engine.run('x');
    await printBatchMedians(run, {
      warmUp: async () => {
        const warmUntil = Date.now() + 2_000;
        while (Date.now() < warmUntil) await timeBatch(run, 50);
      },
      batches: 10,
      perBatch: 200,
    });
    await engine.close();
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
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
