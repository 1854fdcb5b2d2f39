// One contender of the workflow benchmark (bench/workflow.bench.ts) in a process of its own: forked by the
// benchmark with a shape and a contender, it builds that one contender and then runs batches of it when told,
// answering each with its wall and CPU time per run. Alone in its process, no contender's garbage, JIT
// state or async hooks (LangGraph.js's AsyncLocalStorage turns on promise hooks for every promise in the
// process) weighs on another's runs.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import Database from 'better-sqlite3';
import { stringify } from 'yaml';
import { createStore } from '../src/store/index.js';
import {
  createWorkflowEngine,
  loadWorkflow,
  type WorkflowEngine,
  type WorkflowFunction,
} from '../src/workflow/index.js';

/** The contenders a process can hold; `agentd-shared` is agentd in memory with both peers in its process. */
export const contenderKeys = [
  'agentd-memory',
  'agentd-durable',
  'floor',
  'langgraph',
  'mastra',
  'agentd-shared',
] as const;
export type ContenderKey = (typeof contenderKeys)[number];
export const shapeKeys = ['chain3', 'chain10', 'chain100', 'fan'] as const;
export type ShapeKey = (typeof shapeKeys)[number];

/** What the benchmark sends a contender's process, and what it answers. */
export type Command =
  /** `iterations` and `warmUpMs`: the shape's batch size and warm-up, for `agentd-shared`'s own warm-up. */
  | { cmd: 'build'; shape: ShapeKey; iterations: number; warmUpMs: number }
  | { cmd: 'batch'; iterations: number; minMs?: number }
  | { cmd: 'heap'; runs: number }
  | { cmd: 'release' }
  | { cmd: 'exit' };
/** A timed batch: wall and CPU (all threads) µs per run, and the runs. */
export interface BatchFigures {
  wallUs: number;
  cpuUs: number;
  runs: number;
}
export type Answer =
  | { built: true; name: string }
  | BatchFigures
  | { heapKiB: number }
  | { released: true }
  | { error: string };

type Runner = () => Promise<unknown>;
interface Contender {
  name: string;
  run: Runner;
  close?: () => Promise<void>;
  /** agentd's engine, when the contender is one. */
  engine?: WorkflowEngine;
}

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

/** agentd's engine on a workflow of these nodes, edges and functions, as a contender running `{ v: 0 }`. */
async function agentdContender(
  nodes: NodeSpec[],
  edges: Array<{ from: string; to: string }>,
  functions: Record<string, WorkflowFunction>,
  durable: boolean,
): Promise<Contender> {
  const dir = tempDir();
  writeFileSync(
    join(dir, 'workflow.yaml'),
    stringify({ version: 1, id: `bench-${nodes.length}`, nodes, edges }),
  );
  const workflow = await loadWorkflow(dir);
  let engine: WorkflowEngine;
  if (!durable) engine = await createWorkflowEngine({ workflow, functions });
  else {
    // Durable: the platform store (a SQLite file under a temp state dir), handed to the engine as the runtime does.
    const store = await createStore({ stateDir: join(dir, 'state') });
    const inner = await createWorkflowEngine({ workflow, functions, database: store.db });
    engine = {
      ...inner,
      async close() {
        await inner.close();
        await store.close();
      },
    };
    databases.set(engine, { dir, all: (sql, params) => store.db.all(sql, params) });
  }
  return {
    name: durable ? 'agentd durable (SQLite)' : 'agentd in-memory',
    run: () => engine.run({ v: 0 }),
    close: () => engine.close(),
    engine,
  };
}

// The multi-row INSERTs of the tables a run writes, as `src/workflow/record-store.ts` words them (64/16/4/1
// rows per statement), and the columns that carry the run's id. A run's end records (its events and artifacts
// besides those its stage rows stand for) are on its root task's row, `run_records`, and the stages written in
// the batch that concluded their task on that task's row, `stage_records`, since record version 3.
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
      'owner_id',
      'run_records',
      'stage_records',
    ],
    tail: ' ON CONFLICT (task_id) DO UPDATE SET lifecycle = excluded.lifecycle, status = excluded.status, record = excluded.record, updated_at = excluded.updated_at, completed_at = excluded.completed_at, run_records = COALESCE(excluded.run_records, workflow_tasks.run_records), stage_records = COALESCE(excluded.stage_records, workflow_tasks.stage_records)',
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
    // A column the run filled that the floor would not write makes the floor's row smaller than the run's.
    for (const row of rows[index]!)
      for (const [column, value] of Object.entries(row))
        if (value !== null && !columns.includes(column))
          throw new Error(`the floor does not write ${table}.${column}, which a durable run fills`);
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
export const floorName = 'SQLite alone: the same rows, one commit';

async function agentdChain(length: number, durable: boolean): Promise<Contender> {
  const ids = Array.from({ length }, (_, index) => `n${index + 1}`);
  const order = ['start', ...ids, 'exit'];
  const nodes = [det('start', 'start'), ...ids.map((id) => det(id, 'linear')), det('exit', 'exit')];
  const edges = order.slice(1).map((to, index) => ({ from: order[index]!, to }));
  const functions: Record<string, WorkflowFunction> = {};
  for (const id of ids) functions[id] = (input) => ({ v: (input as { v: number }).v + 1 });
  return agentdContender(nodes, edges, functions, durable);
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
  return agentdContender(nodes, edges, functions, durable);
}

// --- LangGraph.js and Mastra (imported only by the processes that hold one) ----------------------------

async function langgraphChain(length: number): Promise<Contender> {
  const { Annotation, END, START, StateGraph } = await import('@langchain/langgraph');
  const GraphState = Annotation.Root({ v: Annotation<number>() });
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

async function langgraphFan(): Promise<Contender> {
  const { Annotation, START, END, StateGraph } = await import('@langchain/langgraph');
  const GraphState = Annotation.Root({
    v: Annotation<number>(),
    acc: Annotation<number[]>({ reducer: (left, right) => left.concat(right), default: () => [] }),
  });
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

async function mastraChain(length: number): Promise<Contender> {
  const { createStep, createWorkflow } = await import('@mastra/core/workflows');
  const { z } = await import('zod');
  const Value = z.object({ v: z.number() });
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
  const { createStep, createWorkflow } = await import('@mastra/core/workflows');
  const { z } = await import('zod');
  const Value = z.object({ v: z.number() });
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

// --- one contender of one shape --------------------------------------------------------------------------

const chainLength: Record<Exclude<ShapeKey, 'fan'>, number> = { chain3: 3, chain10: 10, chain100: 100 };

async function agentdOf(shape: ShapeKey, durable: boolean): Promise<Contender> {
  return shape === 'fan' ? agentdFan(durable) : agentdChain(chainLength[shape], durable);
}

function langgraphOf(shape: ShapeKey): Promise<Contender> {
  return shape === 'fan' ? langgraphFan() : langgraphChain(chainLength[shape]);
}

function mastraOf(shape: ShapeKey): Promise<Contender> {
  return shape === 'fan' ? mastraFan() : mastraChain(chainLength[shape]);
}

/** Runs `run` `iterations` times one after another, and again as many times until `minMs` have passed. */
async function timeBatch(run: Runner, iterations: number, minMs = 0): Promise<BatchFigures> {
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  const until = start + BigInt(Math.round(minMs * 1e6));
  let runs = 0;
  do {
    for (let index = 0; index < iterations; index++) await run();
    runs += iterations;
  } while (process.hrtime.bigint() < until);
  const wallUs = Number(process.hrtime.bigint() - start) / 1000 / runs;
  const used = process.cpuUsage(cpu);
  return { wallUs, cpuUs: (used.user + used.system) / runs, runs };
}

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

async function retainedHeapKiB(run: Runner, iterations: number): Promise<number> {
  gc();
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let index = 0; index < iterations; index++) await run();
  gc();
  gc();
  return (process.memoryUsage().heapUsed - before) / 1024 / iterations;
}

/**
 * The contender as the benchmark times it. `agentd-shared` is agentd in memory in the setting of earlier
 * versions of this benchmark: one process holding every contender of the shape, which run a batch each, in
 * turn (see `sharedRound`); its figure is agentd's batch.
 */
async function build(shape: ShapeKey, key: ContenderKey): Promise<Contender & { others?: Contender[] }> {
  switch (key) {
    case 'agentd-memory':
      return agentdOf(shape, false);
    case 'agentd-durable':
      return agentdOf(shape, true);
    case 'floor': {
      const durable = await agentdOf(shape, true);
      const floor = await commitFloor(durable.engine!);
      await durable.close!();
      return floor;
    }
    case 'langgraph':
      return langgraphOf(shape);
    case 'mastra':
      return mastraOf(shape);
    case 'agentd-shared': {
      const agentd = await agentdOf(shape, false);
      const durable = await agentdOf(shape, true);
      const others = [
        durable,
        await langgraphOf(shape),
        await mastraOf(shape),
        await commitFloor(durable.engine!),
      ];
      return {
        ...agentd,
        name: sharedName,
        others,
        close: async () => {
          for (const contender of [agentd, ...others]) await contender.close?.();
        },
      };
    }
  }
}
export const sharedName = 'agentd in-memory, every contender in its process';

/**
 * The earlier benchmark's warm-up in `agentd-shared`'s process: every contender runs batches for `warmUpMs`
 * in two passes, so that agentd's batches, one per round of the benchmark's own warm-up, do not leave its
 * code unoptimised and its retained runs short of their steady state.
 */
async function warmUpShared(
  agentd: Contender,
  others: Contender[],
  iterations: number,
  warmUpMs: number,
): Promise<void> {
  for (let pass = 0; pass < 2; pass++)
    for (const contender of [agentd, ...others]) {
      const until = performance.now() + warmUpMs / 2;
      while (performance.now() < until) await timeBatch(contender.run, iterations);
    }
}

let sharedRounds = 0;
/**
 * One round of the earlier benchmark's loop, every contender a batch, starting one further on each round;
 * gives agentd's batch.
 */
async function sharedRound(
  agentd: Contender,
  others: Contender[],
  iterations: number,
  minMs: number | undefined,
): Promise<BatchFigures> {
  const all = [agentd, ...others];
  const start = sharedRounds++ % all.length;
  let timed: BatchFigures | undefined;
  for (let offset = 0; offset < all.length; offset++) {
    const contender = all[(start + offset) % all.length]!;
    const figures = await timeBatch(contender.run, iterations, minMs);
    if (contender === agentd) timed = figures;
  }
  return timed!;
}

/** Answers the benchmark's commands for contender `key`, one shape after another. */
function serve(key: ContenderKey): void {
  const send = (answer: Answer) => process.send!(answer);
  let contender: (Contender & { others?: Contender[] }) | undefined;
  const handle = async (command: Command): Promise<Answer> => {
    switch (command.cmd) {
      case 'build':
        contender = await build(command.shape, key);
        if (contender.others)
          await warmUpShared(contender, contender.others, command.iterations, command.warmUpMs);
        return { built: true, name: contender.name };
      case 'batch':
        if (contender!.others)
          return sharedRound(contender!, contender!.others, command.iterations, command.minMs);
        return timeBatch(contender!.run, command.iterations, command.minMs);
      case 'heap':
        return { heapKiB: await retainedHeapKiB(contender!.run, command.runs) };
      case 'release':
        await contender?.close?.();
        contender = undefined;
        return { released: true };
      case 'exit':
        for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
        process.exit(0);
    }
  };
  process.on('message', (command: Command) => {
    handle(command).then(send, (error: unknown) =>
      send({ error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
    );
  });
}

if (process.send && process.env.AGENTD_WORKFLOW_BENCH_CONTENDER)
  serve(process.env.AGENTD_WORKFLOW_BENCH_CONTENDER as ContenderKey);
