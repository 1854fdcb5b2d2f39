// Workflow engine overhead: the same graph shapes with pure-function nodes in agentd (in memory, and durable
// with every stage record written to SQLite), LangGraph.js StateGraph and Mastra 0.24 workflows.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { createStep, createWorkflow } from '@mastra/core/workflows';
import Database from 'better-sqlite3';
import { stringify } from 'yaml';
import { z } from 'zod';
import { createStore } from '../src/store/index.js';
import {
  createWorkflowEngine,
  loadWorkflow,
  type WorkflowEngine,
  type WorkflowFunction,
} from '../src/workflow/index.js';

type Runner = () => Promise<unknown>;
interface Contender {
  name: string;
  run: Runner;
  close?: () => Promise<void>;
  /** agentd's engine, when the contender is one. */
  engine?: WorkflowEngine;
}
interface Shape {
  name: string;
  /** Function nodes doing work (agentd additionally runs its START and EXIT stages). */
  functionNodes: number;
  iterations: number;
  build(): Promise<Contender[]>;
}

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

const tempDirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-wfbench-'));
  tempDirs.push(dir);
  return dir;
}

// --- agentd ------------------------------------------------------------------------------------------

type NodeSpec = {
  id: string;
  role: string;
  kind: 'deterministic';
  context: 'none';
  merge_failure_mode?: string;
};
const det = (id: string, role: string): NodeSpec => ({ id, role, kind: 'deterministic', context: 'none' });

/** The durable engine's database, for the commit floor (see `commitFloor`). */
const databases = new WeakMap<WorkflowEngine, { dir: string; all: SqlAll }>();
type SqlAll = (sql: string, params: string[]) => Promise<Array<Record<string, unknown>>>;

async function agentdEngine(
  nodes: NodeSpec[],
  edges: Array<{ from: string; to: string }>,
  functions: Record<string, WorkflowFunction>,
  durable: boolean,
): Promise<WorkflowEngine> {
  const dir = tempDir();
  writeFileSync(
    join(dir, 'workflow.yaml'),
    stringify({ version: 1, id: `bench-${nodes.length}`, nodes, edges }),
  );
  const workflow = await loadWorkflow(dir);
  if (!durable) return createWorkflowEngine({ workflow, functions });
  // Durable: the platform store (a SQLite file under a temp state dir), handed to the engine as the runtime does.
  const store = await createStore({ stateDir: join(dir, 'state') });
  const engine = await createWorkflowEngine({ workflow, functions, database: store.db });
  const wrapped = {
    ...engine,
    async close() {
      await engine.close();
      await store.close();
    },
  };
  databases.set(wrapped, { dir, all: (sql, params) => store.db.all(sql, params) });
  return wrapped;
}

// The four tables' multi-row INSERTs as `src/workflow/record-store.ts` words them (64/16/4/1 rows per
// statement), and the columns that carry the run's id.
const floorTables = [
  {
    table: 'workflow_tasks',
    columns: [
      'task_id',
      'root_task_id',
      'workflow_id',
      'parent_task_id',
      'lineage_type',
      'lifecycle',
      'status',
      'record',
      'created_at',
      'updated_at',
      'completed_at',
    ],
    tail: ' ON CONFLICT (task_id) DO UPDATE SET lifecycle = excluded.lifecycle, status = excluded.status, record = excluded.record, updated_at = excluded.updated_at, completed_at = excluded.completed_at',
    ids: ['task_id', 'root_task_id'],
  },
  {
    table: 'workflow_stages',
    columns: [
      'task_id',
      'stage_index',
      'root_task_id',
      'node_id',
      'node_status',
      'record',
      'started_at',
      'completed_at',
    ],
    tail: '',
    ids: ['task_id', 'root_task_id'],
  },
  {
    table: 'workflow_events',
    columns: ['event_id', 'root_task_id', 'task_id', 'seq', 'stage_id', 'type', 'at', 'payload'],
    tail: '',
    ids: ['event_id', 'root_task_id', 'task_id'],
  },
  {
    table: 'workflow_artifacts',
    columns: [
      'artifact_id',
      'root_task_id',
      'task_id',
      'node_id',
      'type',
      'created_at',
      'payload',
      'metadata',
    ],
    tail: '',
    ids: ['artifact_id', 'root_task_id', 'task_id'],
  },
];

/**
 * SQLite's own price of what one durable run writes: the rows agentd wrote for one run of `engine` (read
 * back from its database), inserted again per call under a fresh run id with the same statements, in one
 * `BEGIN IMMEDIATE … COMMIT` on better-sqlite3 directly — a file of its own beside agentd's, the same
 * schema and pragmas (WAL, synchronous=NORMAL, wal_autocheckpoint 8000). No engine, no JSON encoding: the
 * floor a durable run with one commit cannot go under.
 */
async function commitFloor(engine: WorkflowEngine): Promise<Contender> {
  const { dir, all } = databases.get(engine)!;
  const { taskId } = await engine.run({ v: 0 });
  const rows = await Promise.all(
    floorTables.map(({ table }) => all(`SELECT * FROM ${table} WHERE root_task_id = ?`, [taskId])),
  );
  const schema = (await all(
    "SELECT sql FROM sqlite_master WHERE tbl_name LIKE 'workflow\\_%' ESCAPE '\\' AND sql IS NOT NULL ORDER BY type DESC",
    [],
  )) as Array<{ sql: string }>;
  const bare = new Database(join(dir, 'floor.db'));
  bare.pragma('journal_mode = WAL');
  bare.pragma('synchronous = NORMAL');
  bare.pragma('wal_autocheckpoint = 8000');
  for (const { sql } of schema) bare.exec(sql);
  const statements = floorTables.map(({ table, columns, tail, ids }, index) => {
    const tuple = `(${columns.map(() => '?').join(', ')})`;
    const prepared = new Map<number, Database.Statement>();
    const statementOf = (count: number) => {
      let statement = prepared.get(count);
      if (!statement) {
        statement = bare.prepare(
          `INSERT INTO ${table} (${columns.join(', ')}) VALUES ${Array.from({ length: count }, () => tuple).join(', ')}${tail}`,
        );
        prepared.set(count, statement);
      }
      return statement;
    };
    const idColumns = new Set(ids);
    const template = rows[index]!.map((row) =>
      columns.map((column) => ({ value: row[column], id: idColumns.has(column) })),
    );
    return { statementOf, template };
  });
  const begin = bare.prepare('BEGIN IMMEDIATE');
  const commit = bare.prepare('COMMIT');
  let serial = 0;
  return {
    name: floorName,
    run: async () => {
      const runId = `floor${serial++}`;
      begin.run();
      for (const { statementOf, template } of statements) {
        let next = 0;
        for (const size of [64, 16, 4, 1]) {
          while (template.length - next >= size) {
            const params: unknown[] = [];
            for (let row = next; row < next + size; row++)
              for (const { value, id } of template[row]!)
                params.push(id ? runId + (value as string).slice(taskId.length) : value);
            statementOf(size).run(params);
            next += size;
          }
        }
      }
      commit.run();
    },
    close: async () => {
      bare.close();
    },
  };
}
const floorName = 'SQLite alone: the same rows, one commit';

async function agentdChain(length: number, durable: boolean): Promise<Contender> {
  const ids = Array.from({ length }, (_, index) => `n${index + 1}`);
  const order = ['start', ...ids, 'exit'];
  const nodes = [det('start', 'start'), ...ids.map((id) => det(id, 'linear')), det('exit', 'exit')];
  const edges = order.slice(1).map((to, index) => ({ from: order[index]!, to }));
  const functions: Record<string, WorkflowFunction> = {};
  for (const id of ids) functions[id] = (input) => ({ v: (input as { v: number }).v + 1 });
  const engine = await agentdEngine(nodes, edges, functions, durable);
  return {
    name: durable ? 'agentd durable (SQLite)' : 'agentd in-memory',
    run: () => engine.run({ v: 0 }),
    close: () => engine.close(),
    engine,
  };
}

async function agentdFan(durable: boolean): Promise<Contender> {
  const branches = [1, 2, 3, 4, 5].map((index) => `p${index}`);
  const nodes = [
    det('start', 'start'),
    det('fan', 'branch'),
    ...branches.map((id) => det(id, 'linear')),
    det('join', 'merge'),
    det('exit', 'exit'),
  ];
  const edges = [
    { from: 'start', to: 'fan' },
    ...branches.map((id) => ({ from: 'fan', to: id })),
    ...branches.map((id) => ({ from: id, to: 'join' })),
    { from: 'join', to: 'exit' },
  ];
  const functions: Record<string, WorkflowFunction> = {
    join: (input) => ({
      v: (input as { merge_inputs: Array<{ output: { v: number } }> }).merge_inputs.reduce(
        (sum, entry) => sum + entry.output.v,
        0,
      ),
    }),
  };
  branches.forEach((id, index) => {
    functions[id] = (input) => ({ v: (input as { v: number }).v + index + 1 });
  });
  const engine = await agentdEngine(nodes, edges, functions, durable);
  return {
    name: durable ? 'agentd durable (SQLite)' : 'agentd in-memory',
    run: () => engine.run({ v: 0 }),
    close: () => engine.close(),
    engine,
  };
}

// --- LangGraph.js --------------------------------------------------------------------------------------

const GraphState = Annotation.Root({
  v: Annotation<number>(),
  acc: Annotation<number[]>({ reducer: (left, right) => left.concat(right), default: () => [] }),
});

function langgraphChain(length: number): Contender {
  let graph: any = new StateGraph(GraphState);
  for (let index = 1; index <= length; index++)
    graph = graph.addNode(`n${index}`, (state: { v: number }) => ({ v: state.v + 1 }));
  graph = graph.addEdge(START, 'n1');
  for (let index = 1; index < length; index++) graph = graph.addEdge(`n${index}`, `n${index + 1}`);
  const compiled = graph.addEdge(`n${length}`, END).compile();
  // The default recursion limit (25 supersteps) stops chains longer than that.
  return {
    name: 'LangGraph.js StateGraph',
    run: () => compiled.invoke({ v: 0 }, { recursionLimit: length + 10 }),
  };
}

function langgraphFan(): Contender {
  let graph: any = new StateGraph(GraphState);
  const branches = [1, 2, 3, 4, 5].map((index) => `p${index}`);
  branches.forEach((id, index) => {
    graph = graph.addNode(id, (state: { v: number }) => ({ acc: [state.v + index + 1] }));
  });
  graph = graph.addNode('join', (state: { acc: number[] }) => ({
    v: state.acc.reduce((sum, value) => sum + value, 0),
  }));
  for (const id of branches) graph = graph.addEdge(START, id);
  const compiled = graph.addEdge(branches, 'join').addEdge('join', END).compile();
  return { name: 'LangGraph.js StateGraph', run: () => compiled.invoke({ v: 0 }) };
}

// --- Mastra ------------------------------------------------------------------------------------------

const Value = z.object({ v: z.number() });

async function mastraChain(length: number): Promise<Contender> {
  const steps = Array.from({ length }, (_, index) =>
    createStep({
      id: `s${index + 1}`,
      inputSchema: Value,
      outputSchema: Value,
      execute: async ({ inputData }) => ({ v: inputData.v + 1 }),
    }),
  );
  let workflow: any = createWorkflow({ id: `chain-${length}`, inputSchema: Value, outputSchema: Value });
  for (const step of steps) workflow = workflow.then(step);
  const committed = workflow.commit();
  return {
    name: 'Mastra 0.24 workflow',
    run: async () => (await committed.createRunAsync()).start({ inputData: { v: 0 } }),
  };
}

async function mastraFan(): Promise<Contender> {
  const branches = [1, 2, 3, 4, 5].map((index) =>
    createStep({
      id: `p${index}`,
      inputSchema: Value,
      outputSchema: Value,
      execute: async ({ inputData }) => ({ v: inputData.v + index }),
    }),
  );
  const join = createStep({
    id: 'join',
    inputSchema: z.record(z.string(), Value),
    outputSchema: Value,
    execute: async ({ inputData }) => ({
      v: Object.values(inputData).reduce((sum, entry) => sum + entry.v, 0),
    }),
  });
  const workflow = createWorkflow({ id: 'fan', inputSchema: Value, outputSchema: Value })
    .parallel(branches)
    .then(join)
    .commit();
  return {
    name: 'Mastra 0.24 workflow',
    run: async () => (await workflow.createRunAsync()).start({ inputData: { v: 0 } }),
  };
}

/** The contenders and, after the durable agentd one, its commit floor. */
async function withFloor(contenders: Contender[]): Promise<Contender[]> {
  const durable = contenders.find((contender) => contender.engine && databases.has(contender.engine));
  return durable ? [...contenders, await commitFloor(durable.engine!)] : contenders;
}

// --- measuring ---------------------------------------------------------------------------------------

const shapes: Shape[] = [
  {
    name: '3-node chain',
    functionNodes: 3,
    iterations: 200,
    build: async () =>
      withFloor([
        await agentdChain(3, false),
        await agentdChain(3, true),
        langgraphChain(3),
        await mastraChain(3),
      ]),
  },
  {
    name: '10-node chain',
    functionNodes: 10,
    iterations: 100,
    build: async () =>
      withFloor([
        await agentdChain(10, false),
        await agentdChain(10, true),
        langgraphChain(10),
        await mastraChain(10),
      ]),
  },
  {
    name: '100-node chain',
    functionNodes: 100,
    iterations: 8,
    build: async () =>
      withFloor([
        await agentdChain(100, false),
        await agentdChain(100, true),
        langgraphChain(100),
        await mastraChain(100),
      ]),
  },
  {
    name: '5-way fan-out + join',
    functionNodes: 6,
    iterations: 150,
    build: async () =>
      withFloor([await agentdFan(false), await agentdFan(true), langgraphFan(), await mastraFan()]),
  },
];

const rounds = 5;
/** Warm-up per contender and shape, in two passes (see `run`). */
const warmUpMs = 1_500;

function quantile(sorted: number[], q: number): number {
  const position = (sorted.length - 1) * q;
  const low = Math.floor(position);
  const high = Math.ceil(position);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (position - low);
}

async function timeBatch(run: Runner, iterations: number): Promise<number> {
  const start = process.hrtime.bigint();
  for (let index = 0; index < iterations; index++) await run();
  return Number(process.hrtime.bigint() - start) / 1000 / iterations;
}

async function retainedHeapKiB(run: Runner, iterations: number): Promise<number> {
  gc();
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let index = 0; index < iterations; index++) await run();
  gc();
  gc();
  return (process.memoryUsage().heapUsed - before) / 1024 / iterations;
}

export default {
  name: 'workflow',
  description:
    'workflow engine overhead with pure-function nodes: agentd (in-memory, durable SQLite) vs LangGraph.js and Mastra',
  async run() {
    const rows: Array<Record<string, string | number>> = [];
    const notes: string[] = [];
    try {
      for (const shape of shapes) {
        const contenders = await shape.build();
        // Warm up every contender (JIT, lazy init, a full set of retained runs) until it is in its steady
        // state: at least warmUpMs of runs, the last pass after every other contender's, so no one is
        // measured on code the optimiser has not reached yet.
        for (let pass = 0; pass < 2; pass++)
          for (const contender of contenders) {
            const until = performance.now() + warmUpMs / 2;
            while (performance.now() < until) await timeBatch(contender.run, shape.iterations);
          }
        const samples = new Map<string, number[]>(contenders.map((contender) => [contender.name, []]));
        for (let round = 0; round < rounds; round++) {
          // Interleaved, rotating start, so machine load hits every contender alike.
          for (let offset = 0; offset < contenders.length; offset++) {
            const contender = contenders[(round + offset) % contenders.length]!;
            samples.get(contender.name)!.push(await timeBatch(contender.run, shape.iterations));
          }
        }
        const heapRuns = Math.max(20, shape.iterations);
        const medians = new Map<string, number>();
        for (const contender of contenders) {
          const sorted = samples.get(contender.name)!.sort((a, b) => a - b);
          const median = quantile(sorted, 0.5);
          medians.set(contender.name, median);
          rows.push({
            shape: shape.name,
            contender: contender.name,
            'median µs/run': Math.round(median * 10) / 10,
            'p90 µs/run': Math.round(quantile(sorted, 0.9) * 10) / 10,
            'µs/node': Math.round((median / shape.functionNodes) * 100) / 100,
            'heap KiB/run': Math.round((await retainedHeapKiB(contender.run, heapRuns)) * 100) / 100,
          });
        }
        const agentd = medians.get('agentd in-memory')!;
        const durable = medians.get('agentd durable (SQLite)')!;
        const langgraph = medians.get('LangGraph.js StateGraph')!;
        const mastra = medians.get('Mastra 0.24 workflow')!;
        notes.push(
          `${shape.name}: agentd in-memory is ${(langgraph / agentd).toFixed(1)}× faster than LangGraph.js and ${(mastra / agentd).toFixed(1)}× faster than Mastra; ` +
            `durable agentd is ${(langgraph / durable).toFixed(1)}× faster than LangGraph.js in-memory.`,
        );
        const floor = medians.get(floorName);
        if (floor !== undefined)
          notes.push(
            `${shape.name}, durable: ${durable.toFixed(1)} µs/run, of which SQLite alone committing the same rows takes ${floor.toFixed(1)} (${((floor / durable) * 100).toFixed(0)} %); ` +
              `the engine above that floor: ${((durable - floor) / shape.functionNodes).toFixed(2)} µs/node, the floor itself ${(floor / shape.functionNodes).toFixed(2)} µs/node.`,
          );
        for (const contender of contenders) await contender.close?.();
      }
    } finally {
      for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
    }
    notes.push(
      `Each figure is the median (and p90) of ${rounds} interleaved batches; a batch awaits N runs one after another (3-node: 200, 10-node: 100, 100-node: 8, fan-out: 150). µs/node divides by the function nodes only.`,
      `Warm-up: every contender runs batches for ${warmUpMs / 1000} s per shape, in two passes over the contenders, before the timed batches: the steady state (optimised code, a full set of retained runs). Earlier versions of this harness warmed up with about 100 runs, which measured agentd's 3-node chain at several times its steady-state cost.`,
      'agentd runs each shape as a YAML workflow with deterministic nodes bound to functions; it also executes its mandatory START and EXIT stages (and a BRANCH + MERGE for the fan-out), goes through the FIFO scheduler, records stage history, routing trace, 3+ telemetry events and a node_output artifact per stage.',
      'agentd durable: the platform store (a SQLite file, WAL, synchronous=NORMAL) under a temp state dir, handed to the engine; stage records, task rows, events and artifacts are written as they happen, gathered per event-loop turn into one transaction in which the rows of each table go in multi-row INSERTs; run() resolves after all writes. A stage is one row (record version 2): its two node events and node_output artifact are made from it when the run is read back.',
      `"${floorName}": the rows one durable run wrote (read back from agentd's database after one run), inserted again per run under a fresh run id by the same multi-row statements, in one BEGIN IMMEDIATE … COMMIT on better-sqlite3 directly, into a file of its own beside agentd's with the same schema and pragmas; timed interleaved with the others. It is what one commit of a run costs with no engine and no encoding: the floor of a durable run.`,
      'LangGraph.js: compiled StateGraph, no checkpointer, invoke(); fan-out via 5 edges from START and a join with a list reducer. Mastra: createWorkflow().then(step)…commit(), createRunAsync().start() per run, no storage configured; fan-out via .parallel([5 steps]).then(join).',
      'heap KiB/run: heapUsed growth after forced GC across a batch of runs, divided by the runs (retained memory per run). agentd keeps the last 100 finished runs in memory for status/inspect by default (retainRuns), which this figure includes.',
    );
    return { rows, notes };
  },
};
