// Agentd-only replica of bench/workflow.bench.ts's agentd contenders: same shapes, iterations and method.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';

const root = process.argv[2]!;
const mode = process.argv[3]!; // old | new
const wf = await import(join(root, 'src/workflow/index.ts'));
const store = await import(join(root, 'src/store/index.ts'));

const det = (id: string, role: string) => ({ id, role, kind: 'deterministic', context: 'none' });
async function engineFor(nodes: any[], edges: any[], functions: any, durable: boolean) {
  const dir = mkdtempSync(join(tmpdir(), 'wfb-'));
  writeFileSync(join(dir, 'workflow.yaml'), stringify({ version: 1, id: `b${nodes.length}`, nodes, edges }));
  const workflow = await wf.loadWorkflow(dir);
  if (!durable) return wf.createWorkflowEngine({ workflow, functions });
  const stateDir = join(dir, 'state');
  mkdirSync(stateDir);
  if (mode === 'old') return wf.createWorkflowEngine({ workflow, functions, stateDir, durable: true });
  const s = await store.createStore({ stateDir });
  return wf.createWorkflowEngine({ workflow, functions, database: s.db });
}
async function chain(length: number, durable: boolean) {
  const ids = Array.from({ length }, (_, i) => `n${i + 1}`);
  const order = ['start', ...ids, 'exit'];
  const nodes = [det('start', 'start'), ...ids.map((id) => det(id, 'linear')), det('exit', 'exit')];
  const edges = order.slice(1).map((to, i) => ({ from: order[i], to }));
  const functions: any = {};
  for (const id of ids) functions[id] = (input: any) => ({ v: input.v + 1 });
  const engine = await engineFor(nodes, edges, functions, durable);
  return () => engine.run({ v: 0 });
}
async function time(run: () => Promise<unknown>, n: number) {
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await run();
  return Number(process.hrtime.bigint() - start) / 1000 / n;
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
for (const [length, iterations] of [[3, 200], [10, 100], [100, 8]] as const) {
  for (const durable of [false, true]) {
    const run = await chain(length, durable);
    await time(run, Math.max(20, Math.floor(iterations / 2)));
    const samples: number[] = [];
    for (let b = 0; b < 5; b++) samples.push(await time(run, iterations));
    const m = median(samples);
    console.log(`${mode} ${length}-node ${durable ? 'durable' : 'memory '} median ${m.toFixed(1)} µs/run  ${(m / length).toFixed(2)} µs/node`);
  }
}
process.exit(0);
