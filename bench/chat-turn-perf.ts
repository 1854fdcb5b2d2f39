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
//     [--frequency 4999] [--top 15] [--idle-sessions N] [--chains N] [--chains-of "<cause>"] [--call-graph fp|dwarf]
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
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
const nativeCause = 'Node.js native (libuv, stream wrap, V8 API)';
const ambiguousCause = 'JavaScript at an address code of several owners had';
const chainCount = Number(takeFlag(args, '--chains') ?? 0);
const chainsOf = takeFlag(args, '--chains-of') ?? nativeCause;
// `dwarf` unwinds through libc, whose code keeps no frame pointers (malloc's callers), at many times the cost.
const callGraph = takeFlag(args, '--call-graph') ?? 'fp';

if (spawnSync('perf', ['--version']).status !== 0) {
  console.error('chat-turn-perf: perf is not installed (apt-get install -y linux-perf)');
  process.exit(2);
}
assertRuntimeBuilt();

interface Frame {
  address: number;
  symbol: string;
  object: string;
}

/**
 * V8's `--perf-basic-prof` map of one server (`/tmp/perf-<pid>.map`): a line per code object as it was made.
 * Code space is reused once code is collected, so one address can have had several functions over a run;
 * perf names it after one of them, whichever sample it was. `namesAt` gives them all.
 */
interface CodeMap {
  starts: number[];
  ends: number[];
  names: string[];
  longest: number;
}

function readCodeMap(pid: number): CodeMap {
  const path = `/tmp/perf-${pid}.map`;
  const entries: Array<{ start: number; end: number; name: string }> = [];
  if (existsSync(path))
    for (const line of readFileSync(path, 'utf8').split('\n')) {
      const match = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
      if (!match) continue;
      const start = Number.parseInt(match[1]!, 16);
      entries.push({ start, end: start + Number.parseInt(match[2]!, 16), name: match[3]! });
    }
  entries.sort((a, b) => a.start - b.start);
  return {
    starts: entries.map((entry) => entry.start),
    ends: entries.map((entry) => entry.end),
    names: entries.map((entry) => entry.name),
    longest: entries.reduce((longest, entry) => Math.max(longest, entry.end - entry.start), 0),
  };
}

/** The distinct JavaScript names the map gives the code objects that covered `address`. */
function namesAt(map: CodeMap, address: number): string[] {
  let low = 0;
  let high = map.starts.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (map.starts[middle]! <= address) low = middle + 1;
    else high = middle;
  }
  const names = new Set<string>();
  for (let index = low - 1; index >= 0 && map.starts[index]! > address - map.longest; index--)
    if (map.ends[index]! > address && javascriptFrame.test(map.names[index]!)) names.add(map.names[index]!);
  return [...names];
}

const kernelObject = '[kernel.kallsyms]';
const javascriptFrame = /^JS:[*^~]?/;
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
function causeOf(frames: Frame[], codeMap: CodeMap): string {
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
  if (!script) return nativeCause;
  const owners = new Set(namesAt(codeMap, script.address).map(ownerOf));
  return owners.size > 1 ? ambiguousCause : ownerOf(script.symbol);
}

/**
 * The function a sample is charged to: the innermost JavaScript frame, with the builtins it called; at an
 * address several functions had, all of their names.
 */
function functionOf(frames: Frame[], codeMap: CodeMap): string | undefined {
  if (frames[0]?.object === kernelObject) return undefined;
  for (const frame of frames) {
    if (sqliteObject.test(frame.object)) return undefined;
    if (javascriptFrame.test(frame.symbol)) {
      const names = namesAt(codeMap, frame.address);
      return (names.length > 1 ? names.sort() : [frame.symbol])
        .map((name) =>
          name.replace(javascriptFrame, '').replace(/file:\/\/\/\S*\/(dist|bench|node_modules)\//, '$1/'),
        )
        .join(' | ');
    }
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
  /** The samples of the cause `--chains-of` names by their call chain, leaf first (8 frames). */
  byChain: Map<string, number>;
}

/** Reads `perf script`'s call chains (one block of `ip symbol (object)` lines a sample) into counts. */
async function countSamples(
  dataFile: string,
  codeMap: CodeMap,
): Promise<Pick<Census, 'samples' | 'byCause' | 'byFunction' | 'byChain'>> {
  const script = spawn('perf', ['script', '-i', dataFile, '-F', 'ip,sym,dso'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const byCause = new Map<string, number>();
  const byFunction = new Map<string, number>();
  const byChain = new Map<string, number>();
  let samples = 0;
  let frames: Frame[] = [];
  const endSample = () => {
    if (frames.length === 0) return;
    samples++;
    const cause = causeOf(frames, codeMap);
    byCause.set(cause, (byCause.get(cause) ?? 0) + 1);
    const name = functionOf(frames, codeMap);
    if (name) byFunction.set(name, (byFunction.get(name) ?? 0) + 1);
    if (chainCount > 0 && cause === chainsOf) {
      const leaf = `${frames[0]!.symbol} (${frames[0]!.object.replace(/.*\//, '')})`;
      const callers = frames.slice(1, 8).map((frame) => frame.symbol.replace(/\(.*$/, '').slice(0, 60));
      const chain = [leaf, ...callers].join(' ← ');
      byChain.set(chain, (byChain.get(chain) ?? 0) + 1);
    }
    frames = [];
  };
  for await (const line of createInterface({ input: script.stdout })) {
    const match = /^\s*([0-9a-f]+) (.*) \((.*)\)$/.exec(line);
    if (match) frames.push({ address: Number.parseInt(match[1]!, 16), symbol: match[2]!, object: match[3]! });
    else if (line.trim() === '') endSample();
  }
  endSample();
  return { samples, byCause, byFunction, byChain };
}

async function census(target: Target, dataFile: string): Promise<Census> {
  let tracedPid = 0;
  const { untraced, traced } = await untracedThenTraced(target, {
    clients: clientCount,
    measureMs,
    prefix: 'perf',
    tracer: (pid) => {
      tracedPid = pid;
      return [
        'perf',
        'record',
        '-q',
        '--call-graph',
        callGraph,
        '-F',
        String(frequencyHz),
        '-o',
        dataFile,
        '-p',
        String(pid),
      ];
    },
  });
  return {
    server: target.name,
    turns: traced.turns,
    cpuUsPerTurn: traced.cpuUsPerTurn,
    untracedCpuUsPerTurn: untraced.cpuUsPerTurn,
    ...(await countSamples(dataFile, readCodeMap(tracedPid))),
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
  const charged = [...runtime.byFunction.values()].reduce((sum, count) => sum + count, 0);
  const shared = [...runtime.byFunction]
    .filter(([name]) => name.includes(' | '))
    .reduce((sum, [, count]) => sum + count, 0);
  console.log(
    `\n${((100 * shared) / Math.max(1, charged)).toFixed(1)} % of the samples charged to a function fell where several functions' code was over the run ("a | b" above: any of them).`,
  );
  if (chainCount > 0)
    for (const result of results) {
      console.log(`\n${result.server}: the ${chainCount} call chains of "${chainsOf}" charged the most\n`);
      row(['leaf ← callers', 'µs a turn']);
      row(['---', '---:']);
      for (const [chain, count] of [...result.byChain].sort((a, b) => b[1] - a[1]).slice(0, chainCount))
        row([`\`${chain}\``, usPerTurn(result, count).toFixed(1)]);
    }
} finally {
  for (const target of targets) await target.stop();
  rmSync(outDir, { recursive: true, force: true });
}
