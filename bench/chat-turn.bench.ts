// Whole-runtime chat turn: OpenClaw-protocol WebSocket clients over loopback sending chat turns through
// agentd's gateway to the whole runtime (createRuntime: durable store, memory write-through of both
// messages, identity, engage loop, local model) at 1, 10 and 100 clients, on SQLite and on Postgres, with a
// bare `ws` server answering every turn with the same frames (the floor) in the same run, interleaved per
// client count; then 100 clients paced at the rate of the 100-client targets (1,500 turns a second; Postgres
// 500). Then 1,000 idle sessions with history: the runtime's RSS after their clients left. Before the
// phases, 1 and 100 clients in short rounds interleaved across the servers, with several processes of each.
//
// Every server runs in its own child process (its CPU time and RSS are its own); the clients share this
// process. AGENTD_BENCH_CPU_PROF=<dir> profiles the runtime servers' CPU during each measured phase (not the
// start-up) and writes <dir>/<server>-<clients>.cpuprofile (summarize with bench/profile-summary.ts).
// AGENTD_BENCH_PG_URL (default postgres://127.0.0.1:5432/test) names the Postgres server; each run uses a
// fresh schema that is dropped afterwards. Without a reachable server the Postgres rows are left out.
// The servers run the compiled dist/ (`npm run build` first), as `npm start` does; AGENTD_BENCH_FROM_SRC=1
// runs src/ through tsx instead (bench/runtime-server.ts).
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { cpus, loadavg, userInfo } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { indexDelayMs } from '../src/memory/ltm-store.js';
import {
  benchToken,
  connect,
  fillIdleSessions,
  floorFramesOf,
  frameArrivalsUs,
  interleavedRoundsOf,
  loadAt,
  type RoundFigures,
  roundMeansBy,
  startTarget,
  type Target,
  warmUp,
} from './chat-turn-driver.js';
import { floorCpuPerTurn, openDurableFloor } from './durable-floor.js';
import { serveEcho } from './echo-floor.js';
import { freshPostgresSchema } from './postgres-schema.js';
import { assertRuntimeBuilt, runtimeSource, serveRuntime } from './runtime-server.js';
import { median, percentile } from './stats.js';

const clientCounts = [1, 10, 100];
/**
 * The paced phases: the 100-client targets as rates, 1,500 turns a second (SQLite) and 500 (Postgres)
 * offered by 100 clients. Longer than the closed phases: at 1,500 turns a second a checkpoint comes every
 * few seconds, and a p99 needs its 1 % of slow turns to be more than a handful.
 */
const pacedClients = 100;
const pacedTurnsPerSecond = 1500;
const pacedPostgresTurnsPerSecond = 500;
const pacedPhaseMs = 6000;
const warmupMs = 500;
/**
 * Before its first measured phase each server serves this long at 10 clients: a long-running server's code is
 * optimised. After 3 s (the warm-up before 2026-11-29) 14% of agentd's main-thread samples were still in
 * baseline (unoptimised) code and V8's helper threads took 19% of the process's samples; after 20 s, 1.4%
 * and 4.6%. 1-client CPU a turn after 3, 9 and 12 s of it: 1,456–1,502, 1,110–1,276 and 1,101–1,178 µs.
 */
const serverWarmupMs = 12_000;
const phaseMs = Number(process.env.AGENTD_BENCH_PHASE_MS ?? 3000);
/**
 * The 1-client figures again, in short rounds interleaved across the servers: on a shared VM agentd measured
 * anywhere from 1,000 to 1,800 µs of CPU a turn from one second to the next (the durable floor within ±11%),
 * so a single phase cannot show a change of a few percent; the median of many short rounds can.
 */
const oneClientRounds = 10;
const oneClientRoundMs = 800;
const oneClientRoundWarmupMs = 200;
/**
 * The rounds again at 100 clients. Fewer and longer: a 100-client round needs its clients' turns to settle
 * after the server's pause, and a server serves many more turns in it.
 */
const manyClientRounds = 6;
const manyClientRoundMs = 1200;
const manyClientRoundWarmupMs = 300;
/**
 * Server processes of each kind in the rounds (Postgres: one): two processes of one build, alternating, measured
 * 493 and 667 µs of CPU a turn at 100 clients and ×1.068 apart at 1 client (bench/results/profiles/
 * chat-turn-round27.md), so a round compares each kind's mean over its processes.
 */
const roundProcesses = 3;
/** Sequential 1-client turns per server whose frames' arrival times are taken. */
const arrivalTurns = 1000;
const idleSessions = 1000;
const idleTurnsPerSession = 2;
const idleClients = 100;
const memorySettleMs = 1500;
const role = process.env.AGENTD_CHAT_TURN_BENCH_ROLE;
/** Without a user name in the URL, the OS user's (as psql does; pg would send none when USER is unset). */
const pgUrl = (() => {
  const url = new URL(process.env.AGENTD_BENCH_PG_URL ?? 'postgres://127.0.0.1:5432/test');
  if (!url.username) url.username = userInfo().username;
  return url.toString();
})();

type ServerName = 'echo' | 'durable-floor' | 'sqlite' | 'postgres';

// --- servers (child processes) --------------------------------------------------------------------------

if (role) {
  const gc = (globalThis as { gc?: () => void }).gc;
  // V8 flags for a diagnostic (bench/chat-turn-gc.ts traces the collector), set before the server starts.
  for (const flag of process.env.AGENTD_BENCH_V8_FLAGS?.split(' ').filter(Boolean) ?? [])
    setFlagsFromString(flag);
  let stopRuntime: (() => Promise<void>) | undefined;
  let port: number;
  if (role === 'echo' || role === 'durable-floor') {
    const durable = role === 'durable-floor' ? await openDurableFloor() : undefined;
    port = await serveEcho(
      Number(process.env.AGENTD_BENCH_HELLO_BYTES),
      JSON.parse(process.env.AGENTD_BENCH_FRAME_BYTES ?? '[]'),
      durable,
    );
    stopRuntime = async () => durable?.close();
  } else {
    const databaseUrl = role === 'postgres' ? process.env.AGENTD_BENCH_DATABASE_URL : undefined;
    const served = await serveRuntime({ token: benchToken, ...(databaseUrl ? { databaseUrl } : {}) });
    port = served.port;
    stopRuntime = served.stop;
  }
  const profiler = new Session();
  process.on('message', async (message: { type: string; file?: string }) => {
    if (message.type === 'profile-start') {
      profiler.connect();
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.setSamplingInterval', { interval: 200 });
      await profiler.post('Profiler.start');
      process.send!({ type: 'profile-start', value: 0 });
    }
    if (message.type === 'profile-stop') {
      const { profile } = await profiler.post('Profiler.stop');
      profiler.disconnect();
      writeFileSync(message.file!, JSON.stringify(profile));
      process.send!({ type: 'profile-stop', value: 0 });
    }
    // What a window's allocations left for a full collection to free, or still hold, by allocation site;
    // with AGENTD_BENCH_HEAP_ALL=1 also what scavenges freed: every byte the window allocated.
    if (message.type === 'heap-sampling-start') {
      profiler.connect();
      await profiler.post('HeapProfiler.enable');
      await profiler.post('HeapProfiler.startSampling', {
        samplingInterval: 256,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: process.env.AGENTD_BENCH_HEAP_ALL === '1',
      });
      process.send!({ type: 'heap-sampling-start', value: 0 });
    }
    if (message.type === 'heap-sampling-stop') {
      const { profile } = await profiler.post('HeapProfiler.stopSampling');
      profiler.disconnect();
      writeFileSync(message.file!, JSON.stringify(profile));
      process.send!({ type: 'heap-sampling-stop', value: 0 });
    }
    if (message.type === 'rss') {
      gc?.();
      gc?.();
      process.send!({ type: 'rss', value: process.memoryUsage().rss });
    }
    if (message.type === 'memory') {
      gc?.();
      gc?.();
      // V8 hands the pages a collection freed back to the system from background threads; read once they
      // have (right after gc the RSS of the same heap varied by tens of MiB from run to run).
      setTimeout(() => process.send!({ type: 'memory', value: process.memoryUsage() }), memorySettleMs);
    }
    if (message.type === 'cpu') {
      const usage = process.cpuUsage();
      process.send!({ type: 'cpu', value: usage.user + usage.system });
    }
    if (message.type === 'stop') {
      void (stopRuntime?.() ?? Promise.resolve()).finally(() => process.exit(0));
    }
  });
  process.send!({ type: 'ready', port });
}

// --- clients (this process) -----------------------------------------------------------------------------

const startServer = (name: ServerName, env: Record<string, string> = {}) =>
  startTarget({ moduleUrl: import.meta.url, role: name, env });

const round = (value: number, digits = 2) => Number(value.toFixed(digits));

/**
 * One measured phase of `count` clients: the closed loop, or with `offeredTurnsPerSecond` that many turns a
 * second offered by the clients together (`pacedLoop`), for `durationMs` after `warmupMs` of the same load.
 */
async function phase(
  target: Target,
  count: number,
  offeredTurnsPerSecond?: number,
  durationMs = phaseMs,
): Promise<Record<string, string | number>> {
  const clients = await connect(target, count, `c${count}`);
  const loop = loadAt(offeredTurnsPerSecond);
  await loop(clients, warmupMs);
  const profileDir = process.env.AGENTD_BENCH_CPU_PROF;
  const profileName = `${target.name}-${count}${offeredTurnsPerSecond === undefined ? '' : `-paced${offeredTurnsPerSecond}`}`;
  const stopProfile = await target.profile(
    profileDir && target.name !== 'echo' ? join(profileDir, `${profileName}.cpuprofile`) : undefined,
  );
  const cpuBefore = await target.cpu();
  const result = await loop(clients, durationMs);
  const cpuUs = (await target.cpu()) - cpuBefore;
  await stopProfile();
  for (const client of clients) client.ws.terminate();
  const rss = await target.rss();
  const sorted = result.latencies.slice().sort((a, b) => a - b);
  const turns = sorted.length;
  return {
    server: target.name,
    clients: count,
    load: offeredTurnsPerSecond === undefined ? 'closed' : `paced ${offeredTurnsPerSecond}/s`,
    turns,
    'turns/s': Math.round((turns * 1000) / result.elapsedMs),
    'p50 ms': round(percentile(sorted, 50), 3),
    'p99 ms': round(percentile(sorted, 99), 3),
    'max ms': round(sorted[sorted.length - 1] ?? Number.NaN, 1),
    'server CPU µs/turn': Math.round(cpuUs / turns),
    'RSS MiB': round(rss / 1024 / 1024, 1),
  };
}

/** 1,000 sessions, each with `idleTurnsPerSession` turns of history, then every client gone. */
async function idleSessionsRss(
  target: Target,
): Promise<{ before: NodeJS.MemoryUsage; after: NodeJS.MemoryUsage; turns: number }> {
  const before = await target.memory();
  const turns = await fillIdleSessions(target, {
    sessions: idleSessions,
    turnsPerSession: idleTurnsPerSession,
    clients: idleClients,
  });
  return { before, after: await target.memory(), turns };
}

function memoryLine(usage: NodeJS.MemoryUsage): string {
  const mib = (bytes: number) => round(bytes / 1024 / 1024, 1);
  return `RSS ${mib(usage.rss)} MiB (JS heap ${mib(usage.heapUsed)} used of ${mib(usage.heapTotal)}, external ${mib(usage.external)})`;
}

export default {
  name: 'chat-turn',
  description:
    'whole-runtime chat turn through the gateway (durable store, memory, identity, engage loop, local model) at 1/10/100 clients on SQLite and Postgres vs a bare ws server sending the same frames: closed loops, then 100 clients offering a fixed rate',
  async run() {
    assertRuntimeBuilt();
    const schema = await freshPostgresSchema(pgUrl, 'agentd_bench');
    const targets: Target[] = [];
    const rows: Array<Record<string, string | number>> = [];
    let idle: Awaited<ReturnType<typeof idleSessionsRss>> | undefined;
    let rounds: Map<string, RoundFigures> | undefined;
    let manyClientRoundsByServer: Map<string, RoundFigures> | undefined;
    /** The rounds' extra server processes (see `roundProcesses`). */
    const extras: Target[] = [];
    const arrivals = new Map<string, number[]>();
    let frameBytes: number[] = [];
    try {
      const sqlite = await startServer('sqlite');
      targets.push(sqlite);
      const floor = await floorFramesOf(sqlite);
      frameBytes = floor.frameBytes;
      const floorEnv = floor.env;
      targets.unshift(await startServer('echo', floorEnv), await startServer('durable-floor', floorEnv));
      if (schema) targets.push(await startServer('postgres', { AGENTD_BENCH_DATABASE_URL: schema.url }));
      for (const target of targets) await warmUp(target, serverWarmupMs);
      for (let copy = 1; copy < roundProcesses; copy++)
        for (const name of ['echo', 'durable-floor', 'sqlite'] as const) {
          const extra = await startServer(name, name === 'sqlite' ? {} : floorEnv);
          await warmUp(extra, serverWarmupMs);
          extras.push(extra);
        }
      const byServer = (figures: Map<Target, RoundFigures>) => roundMeansBy(figures, (target) => target.name);
      rounds = byServer(
        await interleavedRoundsOf([...targets, ...extras], {
          rounds: oneClientRounds,
          roundMs: oneClientRoundMs,
          warmupMs: oneClientRoundWarmupMs,
        }),
      );
      manyClientRoundsByServer = byServer(
        await interleavedRoundsOf(
          [...targets, ...extras].filter((target) => target.name !== 'postgres'),
          {
            rounds: manyClientRounds,
            roundMs: manyClientRoundMs,
            warmupMs: manyClientRoundWarmupMs,
            clients: 100,
          },
        ),
      );
      for (const target of targets) arrivals.set(target.name, await frameArrivalsUs(target, arrivalTurns));
      for (const count of clientCounts)
        for (const target of targets) {
          // The dead rows of the turns so far (updated session rows, evicted entries) are what autovacuum
          // would have cleared on a server with its defaults; this machine's Postgres may run without it.
          if (target.name === 'postgres') await schema?.vacuum();
          rows.push(await phase(target, count));
        }
      for (const target of targets) {
        if (target.name === 'postgres') await schema?.vacuum();
        const offered = target.name === 'postgres' ? pacedPostgresTurnsPerSecond : pacedTurnsPerSecond;
        rows.push(await phase(target, pacedClients, offered, pacedPhaseMs));
      }
      idle = await idleSessionsRss(sqlite);
    } finally {
      await Promise.all([...targets, ...extras].map((target) => target.stop()));
      await schema?.drop();
    }
    // The floor's SQLite work alone, with and without the full-text index, interleaved three times each.
    const floorCpu: { withIndex: number[]; without: number[] } = { withIndex: [], without: [] };
    for (let round = 0; round < 3; round++) {
      floorCpu.withIndex.push(await floorCpuPerTurn(2000));
      floorCpu.without.push(await floorCpuPerTurn(2000, { withoutFullText: true }));
    }
    const row = (server: ServerName, count: number) =>
      rows.find((r) => r.server === server && r.clients === count && r.load === 'closed');
    const pacedRows = rows.filter((r) => r.load !== 'closed');
    const ratios = clientCounts.map((count) => {
      const floor = row('echo', count)!;
      const parts = (['sqlite', 'postgres'] as const).flatMap((server) => {
        const r = row(server, count);
        if (!r) return [];
        return [
          `${server} p50 ×${round(Number(r['p50 ms']) / Number(floor['p50 ms']))}, CPU/turn ×${round(Number(r['server CPU µs/turn']) / Number(floor['server CPU µs/turn']))}`,
        ];
      });
      const durable = row('durable-floor', count);
      const sqlite = row('sqlite', count);
      const aboveDurable =
        durable && sqlite
          ? `; sqlite vs the durable floor: p50 ×${round(Number(sqlite['p50 ms']) / Number(durable['p50 ms']))}, CPU/turn ×${round(Number(sqlite['server CPU µs/turn']) / Number(durable['server CPU µs/turn']))}, turns/s ×${round(Number(sqlite['turns/s']) / Number(durable['turns/s']))}`
          : '';
      return `${count} client(s) vs floor: ${parts.join('; ')}${aboveDurable}`;
    });
    const roundsNote = (() => {
      if (!rounds) return '1-client rounds: not measured';
      const spread = (values: number[], digits: number) =>
        `${round(median(values), digits)} (${round(Math.min(...values), digits)}–${round(Math.max(...values), digits)})`;
      const perRound = (server: ServerName, of: (figures: RoundFigures, index: number) => number) => {
        const figures = rounds!.get(server);
        return figures ? figures.cpuPerTurnUs.map((_, index) => of(figures, index)) : [];
      };
      const servers = [...rounds.entries()].map(
        ([server, figures]) =>
          `${server} ${spread(figures.cpuPerTurnUs, 0)} µs CPU a turn, p50 ${spread(figures.p50Ms, 3)} ms`,
      );
      const echo = rounds.get('echo');
      const durable = rounds.get('durable-floor');
      const ratios =
        echo && durable && rounds.has('sqlite')
          ? `; sqlite in the same round, median (range) of the ${oneClientRounds} ratios: CPU a turn ×${spread(
              perRound(
                'sqlite',
                (figures, index) => figures.cpuPerTurnUs[index]! / durable.cpuPerTurnUs[index]!,
              ),
              2,
            )} the durable floor's, p50 ×${spread(
              perRound('sqlite', (figures, index) => figures.p50Ms[index]! / echo.p50Ms[index]!),
              2,
            )} the bare ws floor's`
          : '';
      return `1 client in ${oneClientRounds} short rounds (each server ${oneClientRoundMs} ms after ${oneClientRoundWarmupMs} ms, servers interleaved, the order reversed every other round; ${roundProcesses} processes each of echo, durable-floor and sqlite, a round's figure the mean over them, one postgres; after the servers' warm-up, before the phases above; one process each before 2026-11-30 22:5x), median (min–max) over the rounds: ${servers.join('; ')}${ratios}`;
    })();
    const manyClientRoundsNote = (() => {
      const figures = manyClientRoundsByServer;
      const durable = figures?.get('durable-floor');
      const sqlite = figures?.get('sqlite');
      if (!figures || !durable || !sqlite) return '100-client rounds: not measured';
      const ratio = (of: (own: RoundFigures) => number[]) =>
        round(median(of(sqlite).map((value, index) => value / of(durable)[index]!)));
      const servers = [...figures.entries()].map(
        ([server, own]) =>
          `${server} ${Math.round(median(own.turnsPerS))} turns/s, ${Math.round(median(own.cpuPerTurnUs))} µs CPU a turn, p99 ${round(median(own.p99Ms), 1)} ms`,
      );
      return `100 clients in ${manyClientRounds} rounds (each server ${manyClientRoundMs} ms after ${manyClientRoundWarmupMs} ms, interleaved as above, ${roundProcesses} processes of each server but postgres, after the 1-client rounds), medians over the rounds: ${servers.join('; ')}; sqlite in the same round ÷ the durable floor, median of the ${manyClientRounds} ratios: turns/s ×${ratio((own) => own.turnsPerS)}, CPU a turn ×${ratio((own) => own.cpuPerTurnUs)}, p99 ×${ratio((own) => own.p99Ms)}`;
    })();
    return {
      rows,
      notes: [
        `frames per turn: ${frameBytes.length} (${frameBytes.join(', ')} bytes); the bare ws server ("echo") sends the same sizes`,
        "\"durable-floor\" is that bare ws server committing what a turn must write, with better-sqlite3 alone into a file with agentd's schema (migrations, FTS5 triggers, indexes) and pragmas: the message and the session's count with its run marked (one statement) before the first frame; the reply and, when it passes 64 active entries, an eviction down to 56 as agentd's default evictDownToRatio does (a tombstone and state per entry, one event), an audit row and the session's count with the mark cleared before the rest; memory ids from the floor's own count (no read of the key's next free id); turns that arrive in one event-loop turn share each commit, as agentd's group commit does (bench/durable-floor.ts)",
        ...ratios,
        roundsNote,
        manyClientRoundsNote,
        arrivals.size
          ? `1 client, ${arrivalTurns} turns one after another per server, after the rounds: median µs from sending a turn to the arrival of each of its frames up to the final event (the answer first, then the run's events): ${[
              ...arrivals,
            ]
              .map(([server, times]) => `${server} ${times.join(', ')}`)
              .join('; ')}`
          : 'frame arrivals: not measured',
        `the durable floor's SQLite work alone (bench/durable-floor.ts in the benchmark's process, no sockets, one client's turns: two commits each and an index batch every ${indexDelayMs} ms, medians of 3 × 2,000 turns): ${Math.round(median(floorCpu.withIndex))} µs CPU a turn; without the FTS5 index of memory entries (no index batches) ${Math.round(median(floorCpu.without))} µs: the full-text index is ${Math.round(100 - (100 * median(floorCpu.without)) / median(floorCpu.withIndex))}% of the floor's SQLite work`,
        `stalls at 1 client, p99 ÷ p50: ${(['sqlite', 'postgres', 'durable-floor', 'echo'] as const)
          .map((server) => {
            const measured = row(server, 1);
            return measured
              ? `${server} ${round(Number(measured['p99 ms']) / Number(measured['p50 ms']))}`
              : undefined;
          })
          .filter(Boolean)
          .join(', ')} (the durable floor commits the same writes with better-sqlite3 alone)`,
        `a closed loop obeys Little's law: with every client keeping one turn in flight, the mean latency is clients ÷ turns/s, so at 100 clients a p99 of 50 ms or less needs more than 2,000 turns/s (at 1,500 turns/s the mean alone is 67 ms); sqlite at 100 clients: 100 ÷ ${row('sqlite', 100)?.['turns/s'] ?? '?'} turns/s = ${row('sqlite', 100) ? round(100_000 / Number(row('sqlite', 100)!['turns/s']), 1) : '?'} ms mean`,
        pacedRows.length
          ? `paced: ${pacedClients} clients on sessions of their own offer ${pacedTurnsPerSecond} turns/s together (postgres ${pacedPostgresTurnsPerSecond}, its target), each client one turn every ${pacedClients} × 1000 ÷ that ms on a fixed schedule, the clients' schedules staggered evenly, for ${pacedPhaseMs} ms after ${warmupMs} ms, after the closed phases; a turn's latency is counted from its slot, so a turn sent late because the one before it had not ended counts the wait too (no coordinated omission); ${pacedRows
              .map(
                (r) => `${r.server} p50 ${r['p50 ms']} ms, p99 ${r['p99 ms']} ms at ${r['turns/s']} turns/s`,
              )
              .join(
                '; ',
              )}. The target "100 clients ≥ 1,500 turns/s with p99 ≤ 50 ms" read as a rate served: in the closed loop the p99 is the queue of the other 99 clients (Little's law, above), which no server under 2,000 turns/s can keep under 50 ms (docs/decisions/0028-paced-load.md)`
          : 'paced phases: not measured',
        `closed loop: each client keeps one turn in flight on its own session for ${phaseMs} ms after ${warmupMs} ms of warm-up; client counts interleaved across servers (echo, durable-floor, sqlite, postgres) so load hits all alike; before its first phase every server serves ${serverWarmupMs} ms of 10-client turns on other sessions, so the 1-client phase does not time a server whose code is still being optimised (3,000 ms before 2026-11-29, 12 s since; none before 2026-11-26)`,
        'server CPU µs/turn: the server process user+system CPU during the phase ÷ turns; RSS after the phase, clients gone, after gc',
        idle
          ? `${idleSessions} idle sessions (SQLite), ${idleTurnsPerSession} turns of history each (${idle.turns} turns from ${idleClients} clients), clients gone, after gc and ${memorySettleMs} ms: ${memoryLine(idle.after)} (before them: ${memoryLine(idle.before)})`
          : 'idle sessions: not measured',
        `servers run ${runtimeSource}`,
        schema
          ? `Postgres: ${pgUrl.replace(/\/\/[^@/]*@/, '//')} with a fresh schema, dropped afterwards; the server's autovacuum is ${schema.autovacuum}, and before each of its phases above the schema's tables are vacuumed and analysed (VACUUM ANALYZE), as autovacuum would have done on a server that had served as many turns (since 2026-11-30; before, the phases ran on the schema as the turns before them left it: on the slower AMD host of 2026-11-30 morning, 293–296 turns/s at 100 clients in the benchmark's phase against 502 after a VACUUM ANALYZE)`
          : `Postgres: ${pgUrl} did not answer; no Postgres rows`,
        `machine: ${cpus().length} cores shared with other work; load average at the end ${loadavg()
          .map((value) => value.toFixed(1))
          .join(' / ')}`,
      ],
    };
  },
};
