// What a chat turn costs at a person's pace: the bare ws floor, the durable floor (the turn's writes with
// better-sqlite3 alone) and the whole runtime on SQLite each serve one client that sends a turn, waits for
// its answer, then sleeps `--gap-ms` before the next, against the same client sending back to back before
// and after. For each turn the server's CPU time (read over IPC just before the turn and just after its
// answer, less what the two reads cost) and the client's time from send to final event. Between a person's
// turns a server sleeps: its caches go cold, and V8 collects garbage while it is idle (the memory reducer),
// which with no turn in flight frees the hidden classes only a turn's objects had and deoptimises the code
// that checks for them; `--trace-deopt` runs the servers with V8's trace and counts, per phase, the code marked
// for deoptimisation that way ("weak objects") and the functions that left optimised code (bailouts). With
// trees named, the whole runtime is each tree's in turn (an A/B: the trees' servers take turns, each --repeat
// times, in the order given then reversed) and --no-floors leaves the floors out. A diagnostic, not a
// benchmark module (`npm run bench` does not run it):
//   npm run build && npx tsx bench/chat-turn-paced.ts [--gap-ms 1000] [--turns 30] [--back-to-back-turns 400]
//     [--warmup-ms 12000] [--trace-deopt] [--server-flags "<node and V8 flags for every server>"]
//     [--repeat 1] [--no-floors] [tree ...]
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { takeFlag } from './args.js';
import { sendChatTurn } from './chat-client.js';
import { connect, floorFramesOf, startTarget, type Target, warmUp } from './chat-turn-driver.js';
import { assertRuntimeBuilt } from './runtime-server.js';
import { median } from './stats.js';

const args = process.argv.slice(2);
const gapMs = Number(takeFlag(args, '--gap-ms') ?? 1000);
const pacedTurns = Number(takeFlag(args, '--turns') ?? 30);
const backToBackTurns = Number(takeFlag(args, '--back-to-back-turns') ?? 400);
const warmupMs = Number(takeFlag(args, '--warmup-ms') ?? 12_000);
const traceDeopt = args.includes('--trace-deopt');
const serverFlags = takeFlag(args, '--server-flags')?.split(' ').filter(Boolean) ?? [];
const repeat = Number(takeFlag(args, '--repeat') ?? 1);
const floors = !args.includes('--no-floors');
// Trees named as chat-turn-ab.ts and chat-turn-gc.ts take them: whatever is not a flag.
const trees = args.filter((arg) => !arg.startsWith('--')).map((tree) => resolve(tree));
assertRuntimeBuilt();

interface Phase {
  label: string;
  latencyMs: number;
  cpuUs: number;
  /** Optimised code V8 marked for deoptimisation because objects it embeds died. */
  weakObjectMarks?: number;
  /** Functions that left optimised code, for any reason (the marked ones included, when they next ran). */
  bailouts?: number;
}

/** Counts the deoptimisations V8's trace prints (with --trace-deopt); each call returns those since the last. */
function deoptCounter(stdout: NodeJS.ReadableStream): () => { weak: number; bailouts: number } {
  let weak = 0;
  let bailouts = 0;
  createInterface({ input: stdout }).on('line', (line) => {
    if (line.includes('reason: weak objects')) weak++;
    else if (line.startsWith('[bailout')) bailouts++;
  });
  return () => {
    const counted = { weak, bailouts };
    weak = 0;
    bailouts = 0;
    return counted;
  };
}

async function phases(target: Target): Promise<Phase[]> {
  const counted = traceDeopt ? deoptCounter(target.stdout!) : undefined;
  await warmUp(target, warmupMs);
  counted?.();
  const [client] = await connect(target, 1, 'paced');
  const turn = () => new Promise<number>((resolve) => sendChatTurn(client!, resolve));
  // What reading the server's CPU costs the server, taken off each turn's figure.
  let readUs = 0;
  for (let index = 0; index < 20; index++) {
    const before = await target.cpu();
    readUs += (await target.cpu()) - before;
  }
  readUs /= 20;
  const phase = async (label: string, turns: number, sleepMs: number): Promise<Phase> => {
    const latencies: number[] = [];
    const cpu: number[] = [];
    for (let index = 0; index < turns; index++) {
      if (sleepMs > 0) await new Promise((resolve) => setTimeout(resolve, sleepMs));
      const before = await target.cpu();
      latencies.push(await turn());
      cpu.push((await target.cpu()) - before - readUs);
    }
    const deopts = counted?.();
    return {
      label,
      latencyMs: median(latencies),
      cpuUs: median(cpu),
      ...(deopts ? { weakObjectMarks: deopts.weak, bailouts: deopts.bailouts } : {}),
    };
  };
  const measured = [
    await phase('back to back', backToBackTurns, 0),
    await phase(`a turn every ${gapMs} ms after the answer`, pacedTurns, gapMs),
    await phase('back to back again', backToBackTurns, 0),
  ];
  client!.ws.terminate();
  return measured;
}

const moduleUrl = new URL('./chat-turn.bench.ts', import.meta.url).href;
const execArgv = [...serverFlags, ...(traceDeopt ? ['--trace-deopt'] : [])];
const servers: Array<{ name: string; results: Phase[] }> = [];
const runtimes: Array<{ name: string; moduleUrl: string }> =
  trees.length === 0
    ? [{ name: 'agentd (SQLite)', moduleUrl }]
    : trees.map((tree) => ({
        name: `agentd (SQLite), ${tree}`,
        moduleUrl: pathToFileURL(`${tree}/bench/chat-turn.bench.ts`).href,
      }));
const order: Array<{ name: string; moduleUrl: string; role: string; env: Record<string, string> }> = [];
if (floors) {
  const probe = await startTarget({ moduleUrl, role: 'sqlite' });
  // The floors send the frames of one of agentd's turns, as in the benchmark.
  const { env: floorEnv } = await floorFramesOf(probe);
  await probe.stop();
  order.push(
    { name: 'bare ws floor', moduleUrl, role: 'echo', env: floorEnv },
    { name: 'durable floor', moduleUrl, role: 'durable-floor', env: floorEnv },
  );
}
for (let round = 0; round < repeat; round++)
  for (const runtime of round % 2 === 0 ? runtimes : [...runtimes].reverse())
    order.push({ ...runtime, role: 'sqlite', env: {} });
for (const { name, moduleUrl, role, env } of order) {
  // One server at a time: a sleeping server's neighbour would not be asleep.
  const target = await startTarget({
    moduleUrl,
    role,
    name,
    env,
    execArgv,
    stdout: traceDeopt ? 'pipe' : 'inherit',
  });
  try {
    servers.push({ name, results: await phases(target) });
  } finally {
    await target.stop();
  }
}

const row = (cells: Array<string | number>) => console.log(`| ${cells.join(' | ')} |`);
console.log(
  `\n1 client; ${backToBackTurns} turns back to back, ${pacedTurns} turns each ${gapMs} ms after the last answer, ${backToBackTurns} back to back again; medians, after ${warmupMs} ms of warm-up at 10 clients\n`,
);
row([
  'server',
  'phase',
  'server CPU µs a turn',
  'send → final, ms',
  ...(traceDeopt ? ['code marked: weak objects', 'bailouts'] : []),
]);
row(['---', '---', '---:', '---:', ...(traceDeopt ? ['---:', '---:'] : [])]);
for (const { name, results } of servers)
  for (const result of results)
    row([
      name,
      result.label,
      Math.round(result.cpuUs),
      result.latencyMs.toFixed(3),
      ...(traceDeopt ? [result.weakObjectMarks ?? 0, result.bailouts ?? 0] : []),
    ]);
process.exit(0);
