// Where one chat turn's time goes on the server, step by step: the whole runtime (bench/runtime-server.ts, the
// compiled dist/) serves one client, and every SQLite statement, every frame the server sends, its ping, the
// client's pong and the calls into the services a turn goes through (memory, identity, skills, the model, the
// bus's events) are timestamped from the arrival of the turn's request. After a warm-up, the turns whose steps
// came in the most common order give the median time of each step. The client runs in a process of its own,
// as a real one does: a client in the server's process would do its work in the server's gaps and answer the
// ping only when the server's thread is free. With --profile-phases the server's thread is also sampled every
// 25 µs while the turns are timed, and each sample counts for the step it fell after: the functions behind
// each gap (the sampler slows the server, so its steps come later than without it). With --gap-ms N the timed
// turns come at a person's pace: the client sleeps N ms before each turn, the first one too (the warm-up stays back to back), so
// that the steps a sleeping server pays more for show beside those of turns back to back. A diagnostic, not a
// benchmark module (`npm run bench` does not run it):
//   npm run build && npx tsx bench/chat-turn-timeline.ts [--warmup-ms 8000] [--measure-ms 2000] [--profile-phases]
//     [--gap-ms 0]
import { fork } from 'node:child_process';
import { Session } from 'node:inspector/promises';
import { createRequire } from 'node:module';
import { takeFlag } from './args.js';
import { sendChatTurn } from './chat-client.js';
import { closedLoop, connect } from './chat-turn-driver.js';
import { type CpuProfile, profileTree } from './cpu-profile.js';
import { assertRuntimeBuilt, serveRuntime } from './runtime-server.js';
import { aroundStatements, type DriverPrototype } from './statement-hooks.js';
import { median } from './stats.js';

const args = process.argv.slice(2);
const warmupMs = Number(takeFlag(args, '--warmup-ms') ?? 8000);
const measureMs = Number(takeFlag(args, '--measure-ms') ?? 2000);
const profilePhases = args.includes('--profile-phases');
const gapMs = Number(takeFlag(args, '--gap-ms') ?? 0);
const clientOf = process.env.AGENTD_TIMELINE_CLIENT_OF;

if (clientOf) {
  // The client's process: one closed-loop client, told by the server's process when the timed turns start.
  const [client] = await connect({ port: Number(clientOf) }, 1, 'timeline');
  await closedLoop([client!], warmupMs);
  process.send!('measure');
  if (gapMs === 0) await closedLoop([client!], measureMs);
  else
    for (const deadline = performance.now() + measureMs; performance.now() < deadline; ) {
      await new Promise((resolve) => setTimeout(resolve, gapMs));
      await new Promise((resolve) => sendChatTurn(client!, resolve));
    }
  process.send!('done');
  client!.ws.terminate();
  process.exit(0);
}

// The runtime's own copies of the driver and of ws (the benchmark's node_modules has its own ws).
const fromRoot = createRequire(new URL('../package.json', import.meta.url));
const Database = fromRoot('better-sqlite3') as { prototype: Record<string, unknown> };
const WebSocket = fromRoot('ws') as { prototype: Record<string, unknown> };

/** A step: what happened, µs from the request's arrival, and when on the monotonic clock (µs, as V8's profiles). */
type Step = [label: string, atUs: number, clockUs: number];
let recording = false;
let turnStart = 0;
let steps: Step[] = [];
const turns: Step[][] = [];
const clockUs = () => Number(process.hrtime.bigint() / 1000n);
const mark = (label: string) => {
  if (!recording) return;
  const now = clockUs();
  steps.push([label, now - turnStart, now]);
};
const sqlLabel = (sql: string) => sql.replace(/\s+/g, ' ').slice(0, 48);

aroundStatements(Database.prototype as unknown as DriverPrototype, (sql, call) => {
  mark(`> ${sqlLabel(sql)}`);
  try {
    return call();
  } finally {
    mark(`< ${sqlLabel(sql)}`);
  }
});
type SocketMethod = (this: { _isServer: boolean }, ...args: unknown[]) => unknown;
const original = (name: 'emit' | 'send' | 'ping') => WebSocket.prototype[name] as SocketMethod;
const [emit, send, ping] = [original('emit'), original('send'), original('ping')];
WebSocket.prototype.emit = function (this: { _isServer: boolean }, ...args: unknown[]) {
  if (this._isServer && args[0] === 'message') {
    if (recording && steps.length > 0) turns.push(steps);
    steps = [];
    turnStart = clockUs();
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
const { runtime } = served;

/** Marks a service's calls: when one starts and, for a promise, when it settles. */
function markCalls(service: object, prefix: string, names: string[]): void {
  const methods = service as Record<string, (...values: unknown[]) => unknown>;
  for (const name of names) {
    const call = methods[name]!;
    methods[name] = function (this: unknown, ...values: unknown[]) {
      mark(`> ${prefix}.${name}`);
      const result = call.apply(this, values);
      if (result instanceof Promise) return result.finally(() => mark(`< ${prefix}.${name}`));
      return result;
    };
  }
}
markCalls(runtime.memory, 'memory', ['append', 'appendBatch', 'pin']);
markCalls(runtime.identity, 'identity', ['systemPrompt']);
markCalls(runtime.skills, 'skills', ['catalog', 'autoActivate']);
markCalls(runtime.model, 'model', ['doStream']);
const publish = runtime.bus.publish;
runtime.bus.publish = function (this: unknown, ...values: Parameters<typeof publish>) {
  mark(`publish ${values[0]}`);
  return publish.apply(this, values);
} as typeof publish;

const session = profilePhases ? new Session() : undefined;
if (session) {
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 25 });
}
const client = fork(new URL(import.meta.url), process.argv.slice(2), {
  execArgv: ['--import', 'tsx'],
  env: { ...process.env, AGENTD_TIMELINE_CLIENT_OF: String(served.port) },
});
await new Promise<void>((resolve, reject) => {
  client.on('message', (message) => {
    if (message === 'measure') {
      recording = true;
      void session?.post('Profiler.start');
    } else if (message === 'done') {
      recording = false;
      resolve();
    }
  });
  client.on('exit', (code) => reject(new Error(`the client process exited with code ${code}`)));
});
client.removeAllListeners('exit');
// A profile taken with samples has them and their deltas: the inspector's type leaves them optional.
const profile = session ? ((await session.post('Profiler.stop')).profile as CpuProfile) : undefined;
await served.stop();

const byOrder = new Map<string, Step[][]>();
for (const turn of turns) {
  const order = turn.map(([label]) => label.replace(/\d+/g, '#')).join('\n');
  byOrder.set(order, [...(byOrder.get(order) ?? []), turn]);
}
const [order, same] = [...byOrder].sort((a, b) => b[1].length - a[1].length)[0]!;
const labels = order.split('\n');
console.log(
  `${turns.length} turns after ${warmupMs} ms of warm-up; ${same.length} in the most common order of steps. Median µs from the request's arrival:`,
);
labels.forEach((label, index) => {
  console.log(`${String(Math.round(median(same.map((turn) => turn[index]![1])))).padStart(6)}  ${label}`);
});

if (profile) {
  // Each sample counts for the step it fell after, in the turns of the common order: what the server's
  // thread ran in each gap, named by the innermost function and the innermost of agentd's own around it.
  const { byId, parentOf, frameName } = profileTree(profile);
  const sampleName = (id: number) => {
    let own: number | undefined;
    for (let at: number | undefined = id; at !== undefined && own === undefined; at = parentOf.get(at)) {
      if (byId.get(at)!.callFrame.url.includes('/dist/')) own = at;
    }
    return own === undefined || own === id ? frameName(id) : `${frameName(id)}  in  ${frameName(own)}`;
  };
  const perStep = labels.map(() => new Map<string, number>());
  const sampleTimes: number[] = [];
  let at = profile.startTime;
  for (const delta of profile.timeDeltas) {
    at += delta;
    sampleTimes.push(at);
  }
  let sample = 0;
  for (const turn of [...same].sort((a, b) => a[0]![2] - b[0]![2])) {
    while (sample < sampleTimes.length && sampleTimes[sample]! < turn[0]![2]) sample++;
    turn.forEach(([, , stepAt], index) => {
      // The last step's gap runs to the end of the turn's work: 2 ms at most, the next request at the latest.
      const until = turn[index + 1]?.[2] ?? stepAt + 2000;
      for (; sample < sampleTimes.length && sampleTimes[sample]! < until; sample++) {
        const name = sampleName(profile.samples[sample]!);
        perStep[index]!.set(name, (perStep[index]!.get(name) ?? 0) + profile.timeDeltas[sample]!);
      }
    });
  }
  console.log(
    '\nSampled every 25 µs while the turns were timed; µs of samples a turn after each step (8 µs or more):',
  );
  labels.forEach((label, index) => {
    const total = [...perStep[index]!.values()].reduce((sum, us) => sum + us, 0) / same.length;
    if (total < 8) return;
    console.log(`\n${total.toFixed(1).padStart(7)}  after "${label}"`);
    const top = [...perStep[index]!].sort((a, b) => b[1] - a[1]).slice(0, 8);
    for (const [name, us] of top) console.log(`${(us / same.length).toFixed(1).padStart(7)}    ${name}`);
  });
}
process.exit(0);
