// Workflow engine overhead: the same graph shapes with pure-function nodes in agentd (in memory, and durable
// with every stage record written to SQLite), LangGraph.js StateGraph and Mastra 0.24 workflows. Every
// contender runs in a process of its own (bench/workflow-contender.ts), and this one takes turns among them.
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  type Answer,
  type BatchFigures,
  type Command,
  type ContenderKey,
  floorName,
  type ShapeKey,
  sharedName,
} from './workflow-contender.js';

interface Shape {
  key: ShapeKey;
  name: string;
  /** Function nodes doing work (agentd additionally runs its START and EXIT stages). */
  functionNodes: number;
  iterations: number;
  /** Also time agentd in memory with every contender in its process (`agentd-shared`). */
  shared?: boolean;
}

const shapes: Shape[] = [
  { key: 'chain3', name: '3-node chain', functionNodes: 3, iterations: 200, shared: true },
  { key: 'chain10', name: '10-node chain', functionNodes: 10, iterations: 100 },
  { key: 'chain100', name: '100-node chain', functionNodes: 100, iterations: 8 },
  { key: 'fan', name: '5-way fan-out + join', functionNodes: 6, iterations: 150 },
];
const contenders: ContenderKey[] = [
  'agentd-memory',
  'agentd-durable',
  'langgraph',
  'mastra',
  'floor',
  'agentd-shared',
];

const rounds = 5;
/**
 * A timed batch's least length: a contender's batch starts after the others' (each in its own process), on a
 * core their work has just left, and a cheap contender's batch of a few hundred runs lasted 1–15 ms, where
 * that start weighed (agentd's durable 3-node chain: 45–47 µs a run in batches back to back, 52–57 after a
 * pause of 30–100 ms, 66 in the interleaved batches). At 100 ms every contender's batch is long enough, and a
 * durable chain's holds the checkpoints its commits bring (one in about 900).
 */
const minBatchMs = 100;
/** Warm-up per contender and shape, in two passes (see `run`). */
const warmUpMs = 1_500;

/** A contender's process: `ask` sends a command and gives the answer. */
interface Child {
  key: ContenderKey;
  ask(command: Command): Promise<Answer>;
  process: ChildProcess;
}

const contenderModule = fileURLToPath(new URL('./workflow-contender.ts', import.meta.url));

/** Forks the process of one contender (built per shape by `build` commands). */
function spawnContender(key: ContenderKey): Child {
  // The TypeScript loader this process runs under (tsx), or tsx when it runs without one.
  const execArgv = process.execArgv.some((arg) => arg.includes('tsx'))
    ? process.execArgv
    : [...process.execArgv, '--import', 'tsx'];
  const child = fork(contenderModule, [], {
    execArgv,
    env: { ...process.env, AGENTD_WORKFLOW_BENCH_CONTENDER: key },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return {
    key,
    process: child,
    ask(command) {
      const answer = new Promise<Answer>((resolve, reject) => {
        const onExit = (code: number | null) => reject(new Error(`contender ${key} exited (${code})`));
        child.once('exit', onExit);
        child.once('message', (message: Answer) => {
          child.off('exit', onExit);
          if ('error' in message) reject(new Error(`contender ${key}: ${message.error}`));
          else resolve(message);
        });
      });
      child.send(command);
      return answer;
    },
  };
}

async function batch(child: Child, iterations: number, minMs?: number): Promise<BatchFigures> {
  return (await child.ask({ cmd: 'batch', iterations, minMs })) as BatchFigures;
}

function quantile(sorted: number[], q: number): number {
  const position = (sorted.length - 1) * q;
  const low = Math.floor(position);
  const high = Math.ceil(position);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (position - low);
}

const median = (values: number[]) =>
  quantile(
    [...values].sort((a, b) => a - b),
    0.5,
  );

export default {
  name: 'workflow',
  description:
    'workflow engine overhead with pure-function nodes: agentd (in-memory, durable SQLite) vs LangGraph.js and Mastra, each in a process of its own',
  async run() {
    const rows: Array<Record<string, string | number>> = [];
    const notes: string[] = [];
    const all = contenders.map(spawnContender);
    try {
      for (const shape of shapes) {
        const names = new Map<Child, string>();
        const children = all.filter((child) => shape.shared || child.key !== 'agentd-shared');
        for (const child of children) {
          const built = (await child.ask({
            cmd: 'build',
            shape: shape.key,
            iterations: shape.iterations,
            warmUpMs,
          })) as { name: string };
          names.set(child, built.name);
        }
        // Warm up every contender (JIT, lazy init, a full set of retained runs) until it is in its steady
        // state: at least warmUpMs of runs, the last pass after every other contender's, so no one is
        // measured on code the optimiser has not reached yet.
        for (let pass = 0; pass < 2; pass++)
          for (const child of children) {
            const until = performance.now() + warmUpMs / 2;
            while (performance.now() < until) await batch(child, shape.iterations);
          }
        const samples = new Map(
          children.map((child) => [
            child,
            { wall: [] as number[], cpu: [] as number[], runs: [] as number[] },
          ]),
        );
        for (let round = 0; round < rounds; round++) {
          // Interleaved, rotating start, so machine load hits every contender alike; one process runs at
          // a time.
          for (let offset = 0; offset < children.length; offset++) {
            const child = children[(round + offset) % children.length]!;
            const { wallUs, cpuUs, runs } = await batch(child, shape.iterations, minBatchMs);
            samples.get(child)!.wall.push(wallUs);
            samples.get(child)!.cpu.push(cpuUs);
            samples.get(child)!.runs.push(runs);
          }
        }
        const heapRuns = Math.max(20, shape.iterations);
        const medians = new Map<string, number>();
        for (const child of children) {
          const { wall, cpu, runs } = samples.get(child)!;
          const sorted = [...wall].sort((a, b) => a - b);
          const wallMedian = quantile(sorted, 0.5);
          medians.set(names.get(child)!, wallMedian);
          const { heapKiB } = (await child.ask({ cmd: 'heap', runs: heapRuns })) as { heapKiB: number };
          rows.push({
            shape: shape.name,
            contender: names.get(child)!,
            'median µs/run': Math.round(wallMedian * 10) / 10,
            'p90 µs/run': Math.round(quantile(sorted, 0.9) * 10) / 10,
            'CPU µs/run': Math.round(median(cpu) * 10) / 10,
            'µs/node': Math.round((wallMedian / shape.functionNodes) * 100) / 100,
            'heap KiB/run': Math.round(heapKiB * 100) / 100,
            'runs/batch': Math.round(median(runs)),
          });
        }
        for (const child of children) await child.ask({ cmd: 'release' });
        const agentd = medians.get('agentd in-memory')!;
        const durable = medians.get('agentd durable (SQLite)')!;
        const langgraph = medians.get('LangGraph.js StateGraph')!;
        const mastra = medians.get('Mastra 0.24 workflow')!;
        const shared = medians.get(sharedName);
        notes.push(
          `${shape.name}: agentd in-memory is ${(langgraph / agentd).toFixed(1)}× faster than LangGraph.js and ${(mastra / agentd).toFixed(1)}× faster than Mastra; ` +
            `durable agentd is ${(langgraph / durable).toFixed(1)}× faster than LangGraph.js in-memory` +
            (shared === undefined
              ? '.'
              : `; with every contender in its process agentd in-memory takes ${shared.toFixed(1)} µs/run (${(shared / agentd).toFixed(2)}× its own process's).`),
        );
        const floor = medians.get(floorName)!;
        notes.push(
          `${shape.name}, durable: ${durable.toFixed(1)} µs/run, of which SQLite alone committing the same rows takes ${floor.toFixed(1)} (${((floor / durable) * 100).toFixed(0)} %); ` +
            `the engine above that floor: ${((durable - floor) / shape.functionNodes).toFixed(2)} µs/node, the floor itself ${(floor / shape.functionNodes).toFixed(2)} µs/node.`,
        );
      }
    } finally {
      for (const child of all) {
        if (child.process.exitCode !== null) continue;
        const exited = new Promise((resolve) => child.process.once('exit', resolve));
        child.process.send({ cmd: 'exit' } satisfies Command);
        await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5_000))]);
        if (child.process.exitCode === null) child.process.kill();
      }
    }
    notes.push(
      `Each contender runs in a process of its own (bench/workflow-contender.ts, forked per shape), and this process has them run their batches in turn, one process at a time: the same machine load, but no contender's garbage, JIT state or async hooks in another's process (LangGraph.js runs its graphs in an AsyncLocalStorage, which makes Node call promise hooks for every promise in its process).`,
      `"${sharedName}" (3-node chain only): agentd's in-memory engine in the setting of earlier versions of this harness, one process holding every contender of the shape, warmed up as they were (${warmUpMs / 1000} s per contender in two passes) and each running a batch in turn (rotating start) before agentd's batch is taken; the row's figures are agentd's batches. There agentd's batches also pay for the collection of the peers' garbage, and for the promise hooks LangGraph.js's AsyncLocalStorage turns on.`,
      `Each figure is the median (and p90) of ${rounds} interleaved batches; a batch awaits N runs one after another (3-node: 200, 10-node: 100, 100-node: 8, fan-out: 150), and N more until it has lasted ${minBatchMs} ms (runs/batch: the median count; before 2026-12-08 a batch was N runs, which for the cheapest contenders lasted 1–15 ms and weighed the start of each batch, on a core another contender's process had just left, and left the checkpoints of a durable chain's commits out of most batches). CPU µs/run: the contender process's CPU time (all its threads, the garbage collector's included) per run, median of the batches. µs/node divides by the function nodes only.`,
      `Warm-up: every contender runs batches for ${warmUpMs / 1000} s per shape, in two passes over the contenders, before the timed batches: the steady state (optimised code, a full set of retained runs). Earlier versions of this harness warmed up with about 100 runs, which measured agentd's 3-node chain at several times its steady-state cost.`,
      'agentd runs each shape as a YAML workflow with deterministic nodes bound to functions; it also executes its mandatory START and EXIT stages (and a BRANCH + MERGE for the fan-out), goes through the FIFO scheduler, records stage history, routing trace, 3+ telemetry events and a node_output artifact per stage.',
      "agentd durable: the platform store (a SQLite file, WAL, synchronous=NORMAL) under a temp state dir, handed to the engine; stage records, task rows, events and artifacts are written as they happen, gathered per event-loop turn into one transaction in which the rows of each table go in multi-row INSERTs; run() resolves after all writes. A stage record stands for its two node events and node_output artifact, which are made from it when the run is read back (record version 2); the other events and artifacts of the run are one document on the row of its root task, and the stages written in the batch that concludes their task a list on that task's row (record version 3, migration 0046): a chain of pure functions, whose stages all end in one event-loop turn, writes its task row alone, which since record version 5 says nothing the row already says (decision 0053).",
      `"${floorName}": the rows one durable run wrote (read back from the database of a durable agentd engine the floor's process builds, runs once and closes), inserted again per run under a fresh run id by the same multi-row statements, in one BEGIN IMMEDIATE … COMMIT on better-sqlite3 directly, into a file of its own with the same schema and pragmas; timed interleaved with the others. It is what one commit of a run costs with no engine and no encoding: the floor of a durable run.`,
      'LangGraph.js: compiled StateGraph, no checkpointer, invoke(); fan-out via 5 edges from START and a join with a list reducer. Mastra: createWorkflow().then(step)…commit(), createRunAsync().start() per run, no storage configured; fan-out via .parallel([5 steps]).then(join).',
      'heap KiB/run: heapUsed growth after forced GC across a batch of runs, divided by the runs (retained memory per run). agentd keeps the last 100 finished runs in memory for status/inspect by default (retainRuns), which this figure includes.',
    );
    return { rows, notes };
  },
};
