// Interleaved A/B of a durable workflow run between builds of agentd: a 3-node chain of pure functions on a
// SQLite store (WAL, synchronous=NORMAL, as agentd runs it) in a temporary directory, from each tree's dist/.
// Each round starts one process per tree (the order reversed every other round), which warms up for 2 s and
// then times 10 batches of 200 runs one after another: the median µs of wall time and of CPU time a run. A
// process of its own per round and tree, so no tree's garbage, JIT state or page cache meets another's. Not a
// benchmark module (`npm run bench` does not run it); the trees need dist/ built (see bench/chat-turn-ab.ts for
// a worktree of an older revision):
//   npx tsx bench/workflow-durable-ab.ts /tmp/before . [--rounds 5]
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { takeFlag } from './args.js';
import { interleavedRounds, printTreeTable, treesFrom } from './tree-ab.js';

const workflowYaml = `version: 1
id: chain
nodes:
${['start:start', 'n1:linear', 'n2:linear', 'n3:linear', 'exit:exit']
  .map((entry) => {
    const [id, role] = entry.split(':');
    return `  - { id: ${id}, role: ${role}, kind: deterministic, context: none }`;
  })
  .join('\n')}
edges:
  - { from: start, to: n1 }
  - { from: n1, to: n2 }
  - { from: n2, to: n3 }
  - { from: n3, to: exit }
`;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

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
      functions: { n1: pass, n2: pass, n3: pass },
    });
    const batch = async (runs: number) => {
      const startedAt = performance.now();
      const cpu = process.cpuUsage();
      for (let run = 0; run < runs; run++) await engine.run('x');
      const used = process.cpuUsage(cpu);
      return {
        wallUs: ((performance.now() - startedAt) * 1000) / runs,
        cpuUs: (used.user + used.system) / runs,
      };
    };
    const warmUntil = Date.now() + 2_000;
    while (Date.now() < warmUntil) await batch(50);
    const batches = [];
    for (let index = 0; index < 10; index++) batches.push(await batch(200));
    console.log(
      JSON.stringify({
        wallUs: median(batches.map((one) => one.wallUs)),
        cpuUs: median(batches.map((one) => one.cpuUs)),
      }),
    );
    await engine.close();
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
  const rounds = Number(takeFlag(args, '--rounds') ?? 5);
  const trees = treesFrom(args, 'workflow-durable-ab <tree> <tree> [...] [--rounds 5]');
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
  console.log('Durable 3-node chain on SQLite, wall time a run:\n');
  printTreeTable(trees, wall, 'µs a run', 1);
  console.log('\nCPU time a run:\n');
  printTreeTable(trees, cpu, 'µs a run', 1);
}
