// What the slow turns of chat clients ran into: the whole runtime (bench/runtime-server.ts, the compiled
// dist/) serves closed-loop clients (one unless --clients says otherwise) from a process of their own, which
// notes when each turn was sent and how long it took; the server notes every garbage collection pause and every SQLite call (statement or
// exec) longer than a threshold, on the same wall clock. Each turn slower than a fraction of the p99 is put
// down to what overlapped it on the server: the tail of a 1-client turn (p99 ÷ p50) by cause. With many
// clients every turn overlaps something, so the pauses' totals and longest ones say more than the causes, and
// the p99 of the turns that overlapped no checkpointing commit (5 ms or more) says what the checkpoints add.
// --print-ms N prints each SQLite call of N ms or more with its parameters. With --wal-pages it then counts
// the WAL frames 2 s of turns of the same clients write, by the table or index each page belongs to (every
// frame is a page written twice, header and body: the commits' system calls). --paced N offers N turns a
// second from all the clients together (bench/chat-turn-driver.ts's pacedLoop) instead of the closed loop.
// A diagnostic, not a benchmark module (`npm run bench` does not run it):
//   npm run build && npx tsx bench/chat-turn-tail.ts [--clients 1] [--warmup-ms 8000] [--measure-ms 6000]
//     [--over 0.8] [--min-ms 0.4] [--print-ms 3] [--wal-pages] [--paced 1500]
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { PerformanceObserver } from 'node:perf_hooks';
import { takeFlag } from './args.js';
import { connect, loadAt } from './chat-turn-driver.js';
import { assertRuntimeBuilt, serveRuntime } from './runtime-server.js';
import { percentile } from './stats.js';

const args = process.argv.slice(2);
const warmupMs = Number(takeFlag(args, '--warmup-ms') ?? 8000);
const measureMs = Number(takeFlag(args, '--measure-ms') ?? 6000);
/** A turn is slow above this fraction of the p99. */
const slowOfP99 = Number(takeFlag(args, '--over') ?? 0.8);
/** Server pauses and calls shorter than this are not noted. */
const minMs = Number(takeFlag(args, '--min-ms') ?? 0.4);
const walPages = args.includes('--wal-pages');
/** SQLite calls this long or longer are printed with their parameters as they happen. */
const printMs = Number(takeFlag(args, '--print-ms') ?? Number.POSITIVE_INFINITY);
const clientCount = Number(takeFlag(args, '--clients') ?? 1);
const paced = takeFlag(args, '--paced');
const loop = loadAt(paced === undefined ? undefined : Number(paced));
const clientOf = process.env.AGENTD_TAIL_CLIENT_OF;
/** Both processes' wall clock, in ms with µs resolution. */
const wallMs = () => performance.timeOrigin + performance.now();

type SentTurn = [sentAtMs: number, latencyMs: number];

if (clientOf) {
  const clients = await connect({ port: Number(clientOf) }, clientCount, `tail-${process.pid}`);
  await loop(clients, warmupMs);
  const turns: SentTurn[] = [];
  await loop(clients, measureMs, (latency, sentAt) => turns.push([performance.timeOrigin + sentAt, latency]));
  for (const client of clients) client.ws.terminate();
  // The turns of many clients make a message larger than the pipe takes at once: exit once it is written.
  process.send!({ turns }, () => process.exit(0));
}

// The runtime's own copy of the driver (the benchmark's node_modules may have its own).
const fromRoot = createRequire(new URL('../package.json', import.meta.url));
const Database = fromRoot('better-sqlite3') as {
  prototype: Record<string, unknown>;
  new (path: string, options?: object): { prepare(sql: string): object; close(): void };
};

/** A pause of the server's thread: a collection, or one SQLite call. */
interface Pause {
  atMs: number;
  ms: number;
  what: string;
}
const pauses: Pause[] = [];
const label = (sql: string) =>
  sql
    .replace(/\s+/g, ' ')
    .replace(/\(\?(, \?)*\)(, \(\?(, \?)*\))+/g, '(…rows…)')
    .slice(0, 64);
const timed = (
  target: Record<string, unknown>,
  name: string,
  what: (self: unknown, values: unknown[]) => string,
) => {
  const call = target[name] as (...values: unknown[]) => unknown;
  target[name] = function (this: unknown, ...values: unknown[]) {
    const atMs = wallMs();
    try {
      return call.apply(this, values);
    } finally {
      const ms = wallMs() - atMs;
      if (ms >= minMs) pauses.push({ atMs, ms, what: what(this, values) });
      if (ms >= printMs)
        console.log(`${ms.toFixed(1)} ms: ${what(this, values)} ${JSON.stringify(values).slice(0, 300)}`);
    }
  };
};
timed(Database.prototype, 'exec', (_, values) => `sqlite ${label(String(values[0]))}`);
const statementPrototype = Object.getPrototypeOf(new Database(':memory:').prepare('SELECT 1')) as Record<
  string,
  unknown
>;
for (const name of ['run', 'get', 'all'])
  timed(statementPrototype, name, (self) => `sqlite ${label((self as { source: string }).source)}`);
const gcKinds: Record<number, string> = {
  1: 'scavenge',
  2: 'mark-compact',
  4: 'incremental marking',
  8: 'weak callbacks',
};
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if (entry.duration < minMs) continue;
    const kind = (entry as unknown as { detail?: { kind?: number } }).detail?.kind ?? 0;
    pauses.push({
      atMs: performance.timeOrigin + entry.startTime,
      ms: entry.duration,
      what: `gc ${gcKinds[kind] ?? kind}`,
    });
  }
}).observe({ entryTypes: ['gc'] });

assertRuntimeBuilt();
const served = await serveRuntime({ token: 'bench-token' });
const client = fork(new URL(import.meta.url), process.argv.slice(2), {
  env: { ...process.env, AGENTD_TAIL_CLIENT_OF: String(served.port) },
  execArgv: ['--import', 'tsx'],
});
const { turns } = await new Promise<{ turns: SentTurn[] }>((resolve) =>
  client.once('message', resolve as never),
);
// Turns are noted as they end; the clients' first ones were sent when the timing began.
const measuredFromMs = turns.reduce(
  (earliest, [sentAt]) => Math.min(earliest, sentAt),
  Number.POSITIVE_INFINITY,
);
const measured = pauses.filter((pause) => pause.atMs >= measuredFromMs);

const sorted = turns.map(([, latency]) => latency).sort((a, b) => a - b);
const p50 = percentile(sorted, 50);
const p99 = percentile(sorted, 99);
console.log(
  `${clientCount} client(s), ${turns.length} turns (${((turns.length / measureMs) * 1000).toFixed(0)}/s) in ${measureMs} ms after ${warmupMs} ms: p50 ${p50.toFixed(3)} ms, p99 ${p99.toFixed(3)} ms, p99 ÷ p50 ${(p99 / p50).toFixed(2)}`,
);

const overlaps = ([sentAt, latency]: SentTurn, pause: Pause) =>
  pause.atMs < sentAt + latency && pause.atMs + pause.ms > sentAt;
const checkpoints = measured.filter((pause) => pause.what === 'sqlite COMMIT' && pause.ms >= 5);
const clearOfCheckpoints = turns.filter((turn) => !checkpoints.some((pause) => overlaps(turn, pause)));
const clearLatencies = clearOfCheckpoints.map(([, latency]) => latency).sort((a, b) => a - b);
console.log(
  `commits of 5 ms or more (the checkpoints): ${checkpoints.length}, ${checkpoints.reduce((total, pause) => total + pause.ms, 0).toFixed(0)} ms; ` +
    `the ${clearOfCheckpoints.length} turns that overlapped none: p50 ${percentile(clearLatencies, 50).toFixed(3)} ms, p99 ${percentile(clearLatencies, 99).toFixed(3)} ms`,
);

const slow = turns.filter(([, latency]) => latency > slowOfP99 * p99);
const causes = new Map<string, number>();
for (const [sentAt, latency] of slow) {
  const overlapping = measured.filter((pause) => overlaps([sentAt, latency], pause));
  const cause =
    overlapping.length === 0
      ? '(no pause noted on the server)'
      : [...new Set(overlapping.map((pause) => pause.what))].join(' + ');
  causes.set(cause, (causes.get(cause) ?? 0) + 1);
}
console.log(
  `\nturns slower than ${slowOfP99} × p99 (${slow.length}), by what overlapped them on the server:`,
);
for (const [cause, count] of [...causes].sort((a, b) => b[1] - a[1]).slice(0, 20))
  console.log(`${String(count).padStart(6)}  ${cause}`);

const kinds = new Map<string, { count: number; ms: number; maxMs: number }>();
for (const pause of measured) {
  const kind = kinds.get(pause.what) ?? { count: 0, ms: 0, maxMs: 0 };
  kind.count++;
  kind.ms += pause.ms;
  kind.maxMs = Math.max(kind.maxMs, pause.ms);
  kinds.set(pause.what, kind);
}
console.log(`\nserver pauses of ${minMs} ms or more while the turns were timed:`);
console.log('   count  total ms  max ms  what');
for (const [what, kind] of [...kinds].sort((a, b) => b[1].ms - a[1].ms).slice(0, 20))
  console.log(
    `${String(kind.count).padStart(8)}  ${kind.ms.toFixed(1).padStart(8)}  ${kind.maxMs.toFixed(1).padStart(6)}  ${what}`,
  );

if (walPages) await countWalPages();
await served.stop();
process.exit(0);

/** The frames of 2 s more turns of the same clients, by the B-tree of their page (SQLite's dbstat table). */
async function countWalPages(): Promise<void> {
  const driver = (served.runtime.store.db as unknown as { driver: DriverHandle }).driver;
  const path = driver.name;
  // Checkpoints would move the frames out of the WAL before they are counted; this server is done after.
  driver.pragma('wal_autocheckpoint = 0');
  driver.pragma('wal_checkpoint(TRUNCATE)');
  // Long enough for several of the full-text index's and the audit log's batches, which a few turns miss.
  const counters = await connect({ port: served.port }, clientCount, `tail-wal-${process.pid}`);
  let turnsToCount = 0;
  await loop(counters, 2000, () => turnsToCount++);
  for (const counter of counters) counter.ws.terminate();
  const wal = readFileSync(`${path}-wal`);
  const pageSize = wal.readUInt32BE(8);
  const pages: number[] = [];
  let commits = 0;
  for (let offset = 32; offset + 24 + pageSize <= wal.length; offset += 24 + pageSize) {
    pages.push(wal.readUInt32BE(offset));
    // A frame whose header gives the database's size in pages ends a commit.
    if (wal.readUInt32BE(offset + 4) !== 0) commits++;
  }
  const reader = new Database(path, { readonly: true }) as unknown as DriverHandle;
  const owner = new Map<number, string>();
  for (const row of reader.prepare('SELECT name, pageno FROM dbstat').all() as Array<{
    name: string;
    pageno: number;
  }>)
    owner.set(row.pageno, row.name);
  reader.close();
  const byTree = new Map<string, number>();
  for (const page of pages) {
    const tree = owner.get(page) ?? '(a page freed or added since)';
    byTree.set(tree, (byTree.get(tree) ?? 0) + 1);
  }
  console.log(
    `\nWAL frames of ${turnsToCount} turns of ${clientCount} client(s): ${(pages.length / turnsToCount).toFixed(1)} a turn in ${(commits / turnsToCount).toFixed(2)} commits, by B-tree:`,
  );
  for (const [tree, count] of [...byTree].sort((a, b) => b[1] - a[1]))
    console.log(`${(count / turnsToCount).toFixed(2).padStart(8)}  ${tree}`);
}

interface DriverHandle {
  name: string;
  pragma(sql: string): unknown;
  prepare(sql: string): { all(): unknown[] };
  close(): void;
}
