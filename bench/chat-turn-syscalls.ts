// The system calls a chat turn costs, server by server: the bare ws floor, the durable floor (the turn's
// writes with better-sqlite3 alone) and the whole runtime on SQLite (and on Postgres with --postgres <url>)
// serve closed-loop clients (one unless --clients says otherwise) from processes of their own; each is timed
// untraced (server CPU a turn), then `strace -c -f` counts its calls, every thread's, over the same load.
// A call's price depends on the host far more than the code's does (a virtualised kernel may charge a
// microsecond for the cheapest call), so the counts say how much of a turn is system calls the design cannot
// skip: the WAL's frames (two `pwrite`s each) and locks (`fcntl`), the socket's reads and writes.
// Needs strace; a diagnostic, not a benchmark module (`npm run bench` does not run it):
//   npm run build && npx tsx bench/chat-turn-syscalls.ts [--clients 1] [--warmup-ms 12000] [--measure-ms 4000]
//     [--postgres postgres://root@127.0.0.1:5432/test]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { takeFlag } from './args.js';
import { floorFramesOf, startTarget, type Target, untracedThenTraced, warmUp } from './chat-turn-driver.js';
import { type BenchSchema, freshPostgresSchema } from './postgres-schema.js';
import { assertRuntimeBuilt } from './runtime-server.js';

const args = process.argv.slice(2);
const clientCount = Number(takeFlag(args, '--clients') ?? 1);
const warmupMs = Number(takeFlag(args, '--warmup-ms') ?? 12_000);
const measureMs = Number(takeFlag(args, '--measure-ms') ?? 4000);
const postgresUrl = takeFlag(args, '--postgres');
/** Calls made less often than this a turn by every server are left out of the table. */
const minPerTurn = 0.05;

if (spawnSync('strace', ['-V']).status !== 0) {
  console.error('chat-turn-syscalls: strace is not installed (apt-get install -y strace)');
  process.exit(2);
}
assertRuntimeBuilt();

interface Census {
  server: string;
  cpuUsPerTurn: number;
  turnsPerSecond: number;
  tracedTurns: number;
  callsPerTurn: Map<string, number>;
}

/** `strace -c` output: one row per system call, `calls` the fourth column and the name the last. */
function parseSummary(text: string): Map<string, number> {
  const calls = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$/.exec(line);
    if (match && match[2] !== 'total') calls.set(match[2]!, Number(match[1]));
  }
  return calls;
}

async function census(target: Target, outDir: string): Promise<Census> {
  const out = join(outDir, `${target.name}.strace`);
  const { untraced, traced } = await untracedThenTraced(target, {
    clients: clientCount,
    measureMs,
    prefix: 'syscalls',
    tracer: (pid) => ['strace', '-c', '-f', '-p', String(pid), '-o', out],
  });
  const callsPerTurn = new Map(
    [...parseSummary(readFileSync(out, 'utf8'))].map(([name, calls]) => [name, calls / traced.turns]),
  );
  return {
    server: target.name,
    cpuUsPerTurn: untraced.cpuUsPerTurn,
    turnsPerSecond: untraced.turnsPerSecond,
    tracedTurns: traced.turns,
    callsPerTurn,
  };
}

const targets: Target[] = [];
let schema: BenchSchema | undefined;
const outDir = mkdtempSync(join(tmpdir(), 'agentd-syscalls-'));
try {
  const moduleUrl = new URL('./chat-turn.bench.ts', import.meta.url).href;
  const sqlite = await startTarget({ moduleUrl, role: 'sqlite', name: 'agentd (SQLite)' });
  // The floors send the frames of one of agentd's turns, as in the benchmark.
  const { env: floorEnv } = await floorFramesOf(sqlite);
  targets.push(
    await startTarget({ moduleUrl, role: 'echo', name: 'bare ws floor', env: floorEnv }),
    await startTarget({ moduleUrl, role: 'durable-floor', name: 'durable floor', env: floorEnv }),
    sqlite,
  );
  if (postgresUrl) {
    schema = await freshPostgresSchema(postgresUrl, 'agentd_syscalls');
    if (!schema) throw new Error(`${postgresUrl} did not answer`);
    const env = { AGENTD_BENCH_DATABASE_URL: schema.url };
    targets.push(await startTarget({ moduleUrl, role: 'postgres', name: 'agentd (Postgres)', env }));
  }
  for (const target of targets) await warmUp(target, warmupMs);
  await schema?.vacuum();
  const results: Census[] = [];
  for (const target of targets) results.push(await census(target, outDir));

  const mostPerTurn = (name: string) =>
    Math.max(...results.map((result) => result.callsPerTurn.get(name) ?? 0));
  const names = [...new Set(results.flatMap((result) => [...result.callsPerTurn.keys()]))]
    .filter((name) => mostPerTurn(name) >= minPerTurn)
    .sort((a, b) => mostPerTurn(b) - mostPerTurn(a));
  const total = (result: Census) => [...result.callsPerTurn.values()].reduce((sum, calls) => sum + calls, 0);
  const row = (cells: Array<string | number>) => console.log(`| ${cells.join(' | ')} |`);
  console.log(
    `\n${clientCount} client(s), ${measureMs} ms untraced then ${measureMs} ms under strace, after ${warmupMs} ms of warm-up at 10 clients\n`,
  );
  row(['system calls a turn', ...results.map((result) => result.server)]);
  row(['---', ...results.map(() => '---:')]);
  for (const name of names)
    row([`\`${name}\``, ...results.map((result) => (result.callsPerTurn.get(name) ?? 0).toFixed(2))]);
  row(['all', ...results.map((result) => total(result).toFixed(1))]);
  row(['turns counted under strace', ...results.map((result) => result.tracedTurns)]);
  row(['server CPU µs a turn, untraced', ...results.map((result) => Math.round(result.cpuUsPerTurn))]);
  row(['turns/s, untraced', ...results.map((result) => Math.round(result.turnsPerSecond))]);
} finally {
  for (const target of targets) await target.stop();
  await schema?.drop();
  rmSync(outDir, { recursive: true, force: true });
}
