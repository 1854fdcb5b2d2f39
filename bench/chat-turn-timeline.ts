// Where one chat turn's time goes on the server, step by step: the whole runtime (bench/runtime-server.ts, the
// compiled dist/) serves one client in this process, and every SQLite statement, every frame the server
// sends, its ping and the client's pong are timestamped from the arrival of the turn's request. After a
// warm-up, the turns whose steps came in the most common order give the median time of each step. Client and
// server share the thread, so the gaps where the client works (after a frame is sent) are the client's; the
// server's steps between them are not. A diagnostic, not a benchmark module (`npm run bench` does not run it):
//   npm run build && npx tsx bench/chat-turn-timeline.ts [--warmup-ms 8000] [--measure-ms 2000]
import { createRequire } from 'node:module';
import { takeFlag } from './args.js';
import { closedLoop, connect } from './chat-turn-driver.js';
import { assertRuntimeBuilt, serveRuntime } from './runtime-server.js';

const args = process.argv.slice(2);
const warmupMs = Number(takeFlag(args, '--warmup-ms') ?? 8000);
const measureMs = Number(takeFlag(args, '--measure-ms') ?? 2000);

// The runtime's own copies of the driver and of ws (the benchmark's node_modules has its own ws).
const fromRoot = createRequire(new URL('../package.json', import.meta.url));
const Database = fromRoot('better-sqlite3') as { prototype: Record<string, unknown> };
const WebSocket = fromRoot('ws') as { prototype: Record<string, unknown> };

type Step = [label: string, atUs: number];
let recording = false;
let turnStart = 0;
let steps: Step[] = [];
const turns: Step[][] = [];
const mark = (label: string) => {
  if (recording) steps.push([label, (performance.now() - turnStart) * 1000]);
};
const sqlLabel = (sql: string) => sql.replace(/\s+/g, ' ').slice(0, 48);

const exec = Database.prototype.exec as (this: unknown, sql: string) => unknown;
Database.prototype.exec = function (this: unknown, sql: string) {
  mark(`> ${sqlLabel(sql)}`);
  try {
    return exec.call(this, sql);
  } finally {
    mark(`< ${sqlLabel(sql)}`);
  }
};
const prepare = Database.prototype.prepare as (this: unknown, sql: string, ...rest: unknown[]) => unknown;
Database.prototype.prepare = function (this: unknown, sql: string, ...rest: unknown[]) {
  const statement = prepare.call(this, sql, ...rest) as Record<string, (...values: unknown[]) => unknown>;
  for (const method of ['run', 'get', 'all'] as const) {
    const original = statement[method];
    if (typeof original !== 'function') continue;
    statement[method] = function (this: unknown, ...values: unknown[]) {
      mark(`> ${sqlLabel(sql)}`);
      try {
        return original.apply(this, values);
      } finally {
        mark(`< ${sqlLabel(sql)}`);
      }
    };
  }
  return statement;
};
type SocketMethod = (this: { _isServer: boolean }, ...args: unknown[]) => unknown;
const original = (name: 'emit' | 'send' | 'ping') => WebSocket.prototype[name] as SocketMethod;
const [emit, send, ping] = [original('emit'), original('send'), original('ping')];
WebSocket.prototype.emit = function (this: { _isServer: boolean }, ...args: unknown[]) {
  if (this._isServer && args[0] === 'message') {
    if (recording && steps.length > 0) turns.push(steps);
    steps = [];
    turnStart = performance.now();
    mark('request frame arrives');
  } else if (this._isServer && args[0] === 'pong') mark('pong arrives');
  return emit.apply(this, args);
};
WebSocket.prototype.send = function (this: { _isServer: boolean }, ...args: unknown[]) {
  if (this._isServer) mark(`send ${String(args[0]).slice(0, 40)}`);
  return send.apply(this, args);
};
WebSocket.prototype.ping = function (this: { _isServer: boolean }, ...args: unknown[]) {
  if (this._isServer) mark('ping');
  return ping.apply(this, args);
};

assertRuntimeBuilt();
const served = await serveRuntime({ token: 'bench-token' });
const [client] = await connect({ port: served.port }, 1, 'timeline');
await closedLoop([client!], warmupMs);
recording = true;
await closedLoop([client!], measureMs);
recording = false;
client!.ws.terminate();
await served.stop();

const byOrder = new Map<string, Step[][]>();
for (const turn of turns) {
  const order = turn.map(([label]) => label.replace(/\d+/g, '#')).join('\n');
  byOrder.set(order, [...(byOrder.get(order) ?? []), turn]);
}
const [order, same] = [...byOrder].sort((a, b) => b[1].length - a[1].length)[0]!;
console.log(
  `${turns.length} turns after ${warmupMs} ms of warm-up; ${same.length} in the most common order of steps. Median µs from the request's arrival:`,
);
order.split('\n').forEach((label, index) => {
  const times = same.map((turn) => turn[index]![1]).sort((a, b) => a - b);
  console.log(`${String(Math.round(times[Math.floor(times.length / 2)]!)).padStart(6)}  ${label}`);
});
process.exit(0);
