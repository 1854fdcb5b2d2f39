// Where a chat turn's CPU goes, seen from the kernel: the bare ws floor, the durable floor (the turn's writes
// with better-sqlite3 alone) and the whole runtime on SQLite serve closed-loop clients (one unless --clients
// says otherwise) from processes of their own, each run with `--perf-basic-prof` so that Linux `perf` can name
// the JavaScript it samples. `perf record -g` samples every thread of a server while the clients keep turns in
// flight, and each sample is put down to one cause: the system call it is in (WAL writes, socket writes and
// reads, file locks, the event loop's wait), SQLite's own code, V8's garbage collection or compiler, or else
// the JavaScript it ran for, by package or agentd subsystem (the V8 builtins and runtime functions a script
// calls count for that script). Each cause's share of the samples times the CPU a turn the server used
// without perf, over as many turns just before, gives µs a turn, side by side for the three servers: what
// the runtime spends above each floor, and where. V8's own sampler cannot see inside SQLite or the kernel,
// and it charges the time after a wake-up to the first function that runs. With --idle-sessions N the runtime
// first holds N idle sessions of two turns each, as a server does after a busy hour.
// Optimised code is named by the address it had when it was compiled; code the collector moves later can be
// named after what was there before, so a module's figure is a close estimate, not an exact one.
// Needs perf (apt-get install -y linux-perf) and permission to trace other processes (root, or
// kernel.perf_event_paranoid ≤ 1). A diagnostic, not a benchmark module (`npm run bench` does not run it):
//   npm run build && npx tsx bench/chat-turn-perf.ts [--clients 1] [--warmup-ms 12000] [--measure-ms 6000]
//     [--frequency 4999] [--top 15] [--idle-sessions N]
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { takeFlag } from './args.js';
import {
  fillIdleSessions,
  floorFramesOf,
  startTarget,
  type Target,
  untracedThenTraced,
  warmUp,
} from './chat-turn-driver.js';
import { assertRuntimeBuilt } from './runtime-server.js';

const args = process.argv.slice(2);
const clientCount = Number(takeFlag(args, '--clients') ?? 1);
const warmupMs = Number(takeFlag(args, '--warmup-ms') ?? 12_000);
const measureMs = Number(takeFlag(args, '--measure-ms') ?? 6000);
const frequencyHz = Number(takeFlag(args, '--frequency') ?? 4999);
const topFunctions = Number(takeFlag(args, '--top') ?? 15);
const idleSessions = Number(takeFlag(args, '--idle-sessions') ?? 0);

if (spawnSync('perf', ['--version']).status !== 0) {
  console.error('chat-turn-perf: perf is not installed (apt-get install -y linux-perf)');
  process.exit(2);
}
assertRuntimeBuilt();

interface Frame {
  symbol: string;
  object: string;
}

const kernelObject = '[kernel.kallsyms]';
const sqliteObject = /better_sqlite3\.node$/;
/** The C library call a system call was made through, to what it was for in these servers. */
const systemCallCauses: Array<[RegExp, string]> = [
  [/pwrite/, 'kernel: WAL writes (pwrite)'],
  [/writev|^__libc_write$|^write$/, 'kernel: socket writes'],
  [/^__libc_read$|^read$/, 'kernel: socket reads'],
  [/fcntl/, 'kernel: file locks (fcntl)'],
  [/epoll/, 'kernel: event-loop wait (epoll)'],
];
const garbageCollection =
  /Scaveng|Heap::|MarkCompact|Sweeper|ConcurrentMarking|MinorMark|IncrementalMarking|Evacuat|GCTracer|MemoryAllocator|MemoryChunk|PagedSpace|NewSpace|SemiSpace/;
// JSON.parse's JsonParser is not the compiler: its samples go to the script that parsed.
const compilation =
  /Compiler|compiler::|(?<!Json)Parser|Maglev|maglev::|turboshaft|BytecodeGenerator|Deoptimiz|interpreter::/;
const javascriptFrame = /^JS:[*^~]?/;

/** Who a JavaScript frame's code belongs to: an agentd subsystem, a package, Node.js, or the benchmark. */
function ownerOf(symbol: string): string {
  const dependency = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(symbol);
  if (dependency) return dependency[1]!;
  const agentd = /\/dist\/([^/ :]+)/.exec(symbol);
  if (agentd) return `agentd: ${agentd[1]!.replace(/\.js$/, '')}`;
  if (/ node:/.test(symbol)) return 'Node.js (streams, timers, events)';
  if (/\/bench\//.test(symbol)) return 'benchmark server script';
  return 'JavaScript, unnamed';
}

/** The cause of one sample, its frames leaf first. */
function causeOf(frames: Frame[]): string {
  if (frames.length === 0) return 'unknown';
  if (frames[0]!.object === kernelObject) {
    const caller = frames.find((frame) => frame.object !== kernelObject);
    if (caller)
      for (const [pattern, cause] of systemCallCauses) if (pattern.test(caller.symbol)) return cause;
    if (frames.some((frame) => frame.symbol.includes('page_fault'))) return 'kernel: page faults';
    if (caller && sqliteObject.test(caller.object)) return 'kernel: other, from SQLite';
    return 'kernel: other (scheduling, interrupts, timers)';
  }
  for (const frame of frames) {
    if (javascriptFrame.test(frame.symbol)) break;
    if (sqliteObject.test(frame.object)) return 'SQLite (better-sqlite3)';
    if (garbageCollection.test(frame.symbol)) return 'V8: garbage collection';
    if (compilation.test(frame.symbol)) return 'V8: compiling';
  }
  const script = frames.find((frame) => javascriptFrame.test(frame.symbol));
  return script ? ownerOf(script.symbol) : 'Node.js native (libuv, stream wrap, V8 API)';
}

/** The function a sample is charged to: the innermost JavaScript frame, with the builtins it called. */
function functionOf(frames: Frame[]): string | undefined {
  if (frames[0]?.object === kernelObject) return undefined;
  for (const frame of frames) {
    if (sqliteObject.test(frame.object)) return undefined;
    if (javascriptFrame.test(frame.symbol))
      return frame.symbol
        .replace(javascriptFrame, '')
        .replace(/file:\/\/\/\S*\/(dist|bench|node_modules)\//, '$1/');
  }
  return undefined;
}

interface Census {
  server: string;
  turns: number;
  samples: number;
  cpuUsPerTurn: number;
  untracedCpuUsPerTurn: number;
  byCause: Map<string, number>;
  byFunction: Map<string, number>;
}

/** Reads `perf script`'s call chains (one block of `ip symbol (object)` lines a sample) into counts. */
async function countSamples(dataFile: string): Promise<Pick<Census, 'samples' | 'byCause' | 'byFunction'>> {
  const script = spawn('perf', ['script', '-i', dataFile, '-F', 'ip,sym,dso'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const byCause = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let samples = 0;
  let frames: Frame[] = [];
  const endSample = () => {
    if (frames.length === 0) return;
    samples++;
    const cause = causeOf(frames);
    byCause.set(cause, (byCause.get(cause) ?? 0) + 1);
    const name = functionOf(frames);
    if (name) byFunction.set(name, (byFunction.get(name) ?? 0) + 1);
    frames = [];
  };
  for await (const line of createInterface({ input: script.stdout })) {
    const match = /^\s*[0-9a-f]+ (.*) \((.*)\)$/.exec(line);
    if (match) frames.push({ symbol: match[1]!, object: match[2]! });
    else if (line.trim() === '') endSample();
  }
  endSample();
  return { samples, byCause, byFunction };
}

async function census(target: Target, dataFile: string): Promise<Census> {
  const { untraced, traced } = await untracedThenTraced(target, {
    clients: clientCount,
    measureMs,
    prefix: 'perf',
    tracer: (pid) => [
      'perf',
      'record',
      '-q',
      '-g',
      '-F',
      String(frequencyHz),
      '-o',
      dataFile,
      '-p',
      String(pid),
    ],
  });
  return {
    server: target.name,
    turns: traced.turns,
    cpuUsPerTurn: traced.cpuUsPerTurn,
    untracedCpuUsPerTurn: untraced.cpuUsPerTurn,
    ...(await countSamples(dataFile)),
  };
}

const targets: Target[] = [];
const outDir = mkdtempSync(join(tmpdir(), 'agentd-perf-'));
try {
  const moduleUrl = new URL('./chat-turn.bench.ts', import.meta.url).href;
  // The servers alone name their JavaScript for perf; this process does not need to.
  const env = { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --perf-basic-prof`.trim() };
  const sqlite = await startTarget({ moduleUrl, role: 'sqlite', name: 'agentd (SQLite)', env });
  // The floors send the frames of one of agentd's turns, as in the benchmark.
  const { env: floorEnv } = await floorFramesOf(sqlite);
  targets.push(
    await startTarget({ moduleUrl, role: 'echo', name: 'bare ws floor', env: { ...env, ...floorEnv } }),
    await startTarget({
      moduleUrl,
      role: 'durable-floor',
      name: 'durable floor',
      env: { ...env, ...floorEnv },
    }),
    sqlite,
  );
  for (const target of targets) await warmUp(target, warmupMs);
  if (idleSessions > 0)
    await fillIdleSessions(sqlite, { sessions: idleSessions, turnsPerSession: 2, clients: 100 });
  const results: Census[] = [];
  for (const [index, target] of targets.entries())
    results.push(await census(target, join(outDir, `${index}.data`)));

  // perf's sampling costs the server CPU in proportion to the time it samples (a quarter to a third more on
  // this VM), so the shares are applied to the CPU a turn measured without it, over the turns just before.
  const usPerTurn = (result: Census, count: number | undefined) =>
    ((count ?? 0) / result.samples) * result.untracedCpuUsPerTurn;
  const runtime = results[results.length - 1]!;
  const causes = [...new Set(results.flatMap((result) => [...result.byCause.keys()]))].sort(
    (a, b) =>
      usPerTurn(runtime, runtime.byCause.get(b)) - usPerTurn(runtime, runtime.byCause.get(a)) ||
      a.localeCompare(b),
  );
  const row = (cells: Array<string | number>) => console.log(`| ${cells.join(' | ')} |`);
  console.log(
    `\n${clientCount} client(s); perf at ${frequencyHz} Hz over ${measureMs} ms of turns, after ${warmupMs} ms of warm-up at 10 clients and ${measureMs} ms untimed by perf\n`,
  );
  row(['µs of server CPU a turn', ...results.map((result) => result.server)]);
  row(['---', ...results.map(() => '---:')]);
  for (const cause of causes)
    row([cause, ...results.map((result) => usPerTurn(result, result.byCause.get(cause)).toFixed(1))]);
  row(['all, without perf', ...results.map((result) => Math.round(result.untracedCpuUsPerTurn))]);
  row(['all, under perf', ...results.map((result) => Math.round(result.cpuUsPerTurn))]);
  row(['turns sampled', ...results.map((result) => result.turns)]);
  row(['samples', ...results.map((result) => result.samples)]);

  console.log(
    `\n${runtime.server}: the ${topFunctions} JavaScript functions charged the most (with the builtins they called)\n`,
  );
  row(['function', 'µs a turn', 'share']);
  row(['---', '---:', '---:']);
  for (const [name, count] of [...runtime.byFunction].sort((a, b) => b[1] - a[1]).slice(0, topFunctions))
    row([
      `\`${name}\``,
      usPerTurn(runtime, count).toFixed(1),
      `${((100 * count) / runtime.samples).toFixed(2)} %`,
    ]);
} finally {
  for (const target of targets) await target.stop();
  rmSync(outDir, { recursive: true, force: true });
}
