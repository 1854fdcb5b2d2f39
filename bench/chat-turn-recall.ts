// Automatic recall where a user pays for it: inside served chat turns, over a store that holds 100,000
// memories. The whole runtime (bench/runtime-server.ts, the compiled dist/) runs with
// `memory.recall.promptReuseMs: 0` (--reuse-ms), so every turn searches, as a person's turns seconds apart
// do (by default searches take at most a tenth of the time, which a client sending back to back exceeds);
// its agent's long-term memory holds the recall benchmark's corpus (bench/recall-corpus.ts, ingested through
// a memory service on the runtime's own database, the full-text index merged as the background merge would).
// One client, in a process of its own, sends questions shaped like the recall benchmark's ("what did we say
// about <topic> and <word> <word>?"), one turn after another. Rounds alternate recall on and off (off:
// `memory.recallForPrompt` answers '' at once), the same number of turns each: per round the server's CPU a
// turn and the turns' p50; per call of the search inside the turns its wall and CPU time. A third arm in each
// round times the search only after the work the turn had queued before it (the continuations of the message's
// acknowledgement, which otherwise run at the search's awaits, inside its window). Then the same
// calls for the same session alone in a tight loop, in the same process, as the recall benchmark's "alone".
// --statements also times each SQLite call the searches inside the turns make, by statement.
// A diagnostic, not a benchmark module (`npm run bench` does not run it):
//   npm run build && npx tsx bench/chat-turn-recall.ts [--memories 100000] [--rounds 10] [--turns 400] [--warmup-turns 3000]
//     [--reuse-ms 0] [--statements]
// bench/recall-in-turn.bench.ts runs it with --report, which sends the figures to it instead of printing them.
import { fork } from 'node:child_process';
import { createRequire } from 'node:module';
import { takeFlag } from './args.js';
import { sendChatTurn } from './chat-client.js';
import { connect } from './chat-turn-driver.js';
import { random, topics, word } from './recall-corpus.js';
import { assertRuntimeBuilt, serveRuntime } from './runtime-server.js';
import { median, percentile } from './stats.js';

const args = process.argv.slice(2);
const memoryCount = Number(takeFlag(args, '--memories') ?? 100_000);
const rounds = Number(takeFlag(args, '--rounds') ?? 10);
const turnsPerRound = Number(takeFlag(args, '--turns') ?? 400);
/**
 * Turns of recall before the rounds: the JIT, the session's context filling to its limits, the index's pages.
 * The search's JavaScript is optimised only after a few thousand calls: 600 left the benchmark's p50 at
 * 112–125 µs, where 3,000 and 6,000 gave 99 in the same hour.
 */
const warmupTurns = Number(takeFlag(args, '--warmup-turns') ?? 3000);
/** memory.recall.promptReuseMs of the served runtime: 0 searches every turn, as a person's turns seconds apart do. */
const reuseMs = Number(takeFlag(args, '--reuse-ms') ?? 0);
const timeStatements = args.includes('--statements');
/** Sends the figures to the parent process (bench/recall-in-turn.bench.ts) instead of printing them. */
const report = args.includes('--report');
const aloneCalls = 2_000;
const clientOf = process.env.AGENTD_RECALL_CLIENT_OF;

/** The questions, the same in every run: the recall benchmark's query shape. */
const questions = (seed: number) => {
  const next = random(seed);
  return () =>
    `what did we say about ${topics[Math.floor(next() * topics.length)]} and ${word(next)} ${word(next)}?`;
};

/** p50, p90 and p99 of a sample. */
export type Spread = [p50: number, p90: number, p99: number];

/** What a run measured, as `--report` sends it. */
export interface RecallInTurnReport {
  memoryCount: number;
  rounds: number;
  turnsPerRound: number;
  warmupTurns: number;
  reuseMs: number;
  ingestS: number;
  segments: number;
  mergeS: number;
  /** Each search inside the "on" rounds' turns, µs; the share that found lines. */
  inTurn: { calls: number; withLinesPercent: number; wallUs: Spread; cpuUs: Spread };
  /** Each search inside the "settled" rounds' turns, timed after the work queued before it, µs. */
  settled: { calls: number; wallUs: Spread; cpuUs: Spread };
  /** The same session's searches alone in a tight loop, µs. */
  alone: { calls: number; wallUs: Spread; cpuUs: Spread };
  /** Each round's server CPU a turn (µs) and turn p50 (ms), by arm, in round order. */
  on: Array<{ cpuUs: number; p50Ms: number }>;
  off: Array<{ cpuUs: number; p50Ms: number }>;
}

type FromServer = { type: 'round'; turns: number };
type FromClient = { type: 'ready'; sessionKey: string } | { type: 'round'; latenciesMs: number[] };

if (clientOf) {
  const [client] = await connect({ port: Number(clientOf) }, 1, `recall-${process.pid}`);
  const question = questions(7);
  const turn = () => new Promise<number>((resolve) => sendChatTurn(client!, resolve, question()));
  process.on('message', async (message: FromServer) => {
    const latenciesMs: number[] = [];
    for (let index = 0; index < message.turns; index++) latenciesMs.push(await turn());
    process.send!({ type: 'round', latenciesMs } satisfies FromClient);
  });
  process.on('disconnect', () => process.exit(0));
  process.send!({ type: 'ready', sessionKey: client!.sessionKey } satisfies FromClient);
} else {
  await serve();
}

async function serve(): Promise<void> {
  assertRuntimeBuilt();
  const from = process.env.AGENTD_BENCH_FROM_SRC ? '../src' : '../dist';
  const { createMemoryService } = (await import(
    `${from}/memory/index.js`
  )) as typeof import('../src/memory/index.js');
  const { createLtmStore } = (await import(
    `${from}/memory/ltm-store.js`
  )) as typeof import('../src/memory/ltm-store.js');
  const { createBus } = (await import(`${from}/bus/index.js`)) as typeof import('../src/bus/index.js');
  const { ingestCorpus } = await import('./recall-corpus.js');

  const served = await serveRuntime({
    token: 'bench-token',
    configYaml: `memory:\n  recall:\n    promptReuseMs: ${reuseMs}\n`,
  });
  const { memory, store } = served.runtime;
  // Limits that keep ingestion from evicting, as in the recall benchmark: the figure is about the rows.
  const loader = createMemoryService({
    db: store.db,
    bus: createBus(),
    config: { maxActiveEntries: 2_000, maxActiveTokens: 1_000_000 },
  });
  const ingestMs = await ingestCorpus(loader, { memoryCount, sessions: 100, agentId: 'main' });
  const ltm = createLtmStore(store.db, { sqliteVec: false });
  const segments = await ltm.indexSegments();
  const mergeStarted = performance.now();
  await ltm.mergeIndex();
  const mergeMs = performance.now() - mergeStarted;

  const client = fork(new URL(import.meta.url), [], {
    env: { ...process.env, AGENTD_RECALL_CLIENT_OF: String(served.port) },
    execArgv: ['--import', 'tsx'],
  });
  const fromClient = <Type extends FromClient['type']>(type: Type) =>
    new Promise<Extract<FromClient, { type: Type }>>((resolve) => {
      const listener = (message: FromClient) => {
        if (message.type !== type) return;
        client.off('message', listener);
        resolve(message as Extract<FromClient, { type: Type }>);
      };
      client.on('message', listener);
    });
  const { sessionKey } = await fromClient('ready');

  const search = memory.recallForPrompt.bind(memory);
  /** Wall µs of each SQLite call made while a search inside a turn runs, by its SQL. */
  const statements = new Map<string, number[]>();
  let searching = false;
  if (timeStatements)
    timeSqliteCalls((sql, us) => {
      if (!searching) return;
      const list = statements.get(sql) ?? [];
      list.push(us);
      statements.set(sql, list);
    });
  /** Each search inside a turn of the "on" rounds: wall and CPU µs, and whether it found lines. */
  const calls: Array<{ wallUs: number; cpuUs: number; found: boolean }> = [];
  /** The same in the "settled" rounds. */
  const settledCalls: typeof calls = [];
  let recording = false;
  const timed =
    (into: typeof calls, settle: boolean): typeof search =>
    async (input) => {
      // One event-loop turn: every continuation queued before the search has run once it starts.
      if (settle) await new Promise((resolve) => setImmediate(resolve));
      const cpuAt = process.cpuUsage();
      const wallAt = performance.now();
      searching = recording;
      const block = await search(input).finally(() => {
        searching = false;
      });
      const cpu = process.cpuUsage(cpuAt);
      if (recording)
        into.push({
          wallUs: (performance.now() - wallAt) * 1000,
          cpuUs: cpu.user + cpu.system,
          found: block !== '',
        });
      return block;
    };
  const arms = {
    on: timed(calls, false),
    settled: timed(settledCalls, true),
    off: async () => '',
  } satisfies Record<string, typeof search>;
  const figures = {
    on: [] as Array<{ cpuUs: number; p50Ms: number }>,
    off: [] as Array<{ cpuUs: number; p50Ms: number }>,
  };

  const round = async (arm: keyof typeof arms, turns: number) => {
    memory.recallForPrompt = arms[arm];
    const cpuAt = process.cpuUsage();
    const answered = fromClient('round');
    client.send({ type: 'round', turns } satisfies FromServer);
    const { latenciesMs } = await answered;
    const cpu = process.cpuUsage(cpuAt);
    return {
      cpuUs: (cpu.user + cpu.system) / turns,
      p50Ms: percentile(
        [...latenciesMs].sort((left, right) => left - right),
        50,
      ),
    };
  };
  await round('on', warmupTurns);
  await round('off', turnsPerRound);
  recording = true;
  for (let index = 0; index < rounds; index++) {
    for (const arm of index % 2 === 0
      ? (['on', 'off', 'settled'] as const)
      : (['settled', 'off', 'on'] as const)) {
      const figure = await round(arm, turnsPerRound);
      if (arm !== 'settled') figures[arm].push(figure);
    }
  }
  recording = false;
  memory.recallForPrompt = search;
  client.disconnect();

  const question = questions(11);
  const alone: Array<{ wallUs: number; cpuUs: number }> = [];
  for (let index = 0; index < aloneCalls; index++) {
    const query = question();
    const cpuAt = process.cpuUsage();
    const wallAt = performance.now();
    await search({ agentId: 'main', sessionKey, query });
    const cpu = process.cpuUsage(cpuAt);
    alone.push({ wallUs: (performance.now() - wallAt) * 1000, cpuUs: cpu.user + cpu.system });
  }

  const spreadOf = (values: number[]): Spread => {
    const sorted = [...values].sort((left, right) => left - right);
    return [percentile(sorted, 50), percentile(sorted, 90), percentile(sorted, 99)];
  };
  if (report) {
    const figuresSent: RecallInTurnReport = {
      memoryCount,
      rounds,
      turnsPerRound,
      warmupTurns,
      reuseMs,
      ingestS: ingestMs / 1000,
      segments,
      mergeS: mergeMs / 1000,
      inTurn: {
        calls: calls.length,
        withLinesPercent: (100 * calls.filter((call) => call.found).length) / calls.length,
        wallUs: spreadOf(calls.map((call) => call.wallUs)),
        cpuUs: spreadOf(calls.map((call) => call.cpuUs)),
      },
      settled: {
        calls: settledCalls.length,
        wallUs: spreadOf(settledCalls.map((call) => call.wallUs)),
        cpuUs: spreadOf(settledCalls.map((call) => call.cpuUs)),
      },
      alone: {
        calls: aloneCalls,
        wallUs: spreadOf(alone.map((call) => call.wallUs)),
        cpuUs: spreadOf(alone.map((call) => call.cpuUs)),
      },
      on: figures.on,
      off: figures.off,
    };
    await served.stop();
    process.send!({ type: 'report', report: figuresSent }, () => process.exit(0));
    return;
  }
  const spread = (values: number[]) => {
    const [p50, p90, p99] = spreadOf(values);
    return `p50 ${p50.toFixed(0)}, p90 ${p90.toFixed(0)}, p99 ${p99.toFixed(0)}`;
  };
  const arm = (name: keyof typeof figures) => {
    const cpu = figures[name].map((figure) => figure.cpuUs);
    const p50 = figures[name].map((figure) => figure.p50Ms);
    return `CPU ${median(cpu).toFixed(0)} µs a turn (${Math.min(...cpu).toFixed(0)}–${Math.max(...cpu).toFixed(0)}), turn p50 ${median(p50).toFixed(3)} ms (${Math.min(...p50).toFixed(3)}–${Math.max(...p50).toFixed(3)})`;
  };
  const differences = figures.on.map((figure, index) => figure.cpuUs - figures.off[index]!.cpuUs);
  console.log(
    `store: ${memoryCount.toLocaleString('en')} memories of agent main in 100 sessions, promptReuseMs ${reuseMs} (ingested in ${(ingestMs / 1000).toFixed(1)} s; full-text index ${segments} segments, merged in ${(mergeMs / 1000).toFixed(1)} s); 1 client, ${rounds} rounds of ${turnsPerRound} turns an arm, alternating`,
  );
  console.log(`recall every turn: ${arm('on')}`);
  console.log(`recall off:        ${arm('off')}`);
  console.log(
    `on − off, each round's pair: CPU ${median(differences).toFixed(0)} µs a turn median (${Math.min(...differences).toFixed(0)}–${Math.max(...differences).toFixed(0)})`,
  );
  console.log(
    `the search inside the turns (${calls.length} calls, ${((100 * calls.filter((call) => call.found).length) / calls.length).toFixed(0)} % with lines): wall µs ${spread(calls.map((call) => call.wallUs))}; CPU µs ${spread(calls.map((call) => call.cpuUs))}`,
  );
  console.log(
    `the search inside the turns after their queued work (${settledCalls.length} calls): wall µs ${spread(settledCalls.map((call) => call.wallUs))}; CPU µs ${spread(settledCalls.map((call) => call.cpuUs))}`,
  );
  console.log(
    `the same session's searches alone (${aloneCalls} in a tight loop): wall µs ${spread(alone.map((call) => call.wallUs))}; CPU µs ${spread(alone.map((call) => call.cpuUs))}`,
  );
  if (timeStatements) {
    console.log(
      `\nSQLite calls of the searches inside the turns, by statement (µs a search; calls a search; p50 µs a call):`,
    );
    // Both timed arms' searches ran the statements timed here.
    const searches = calls.length + settledCalls.length;
    const perSearch = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / searches;
    for (const [sql, values] of [...statements]
      .sort((left, right) => perSearch(right[1]) - perSearch(left[1]))
      .slice(0, 12))
      console.log(
        `${perSearch(values).toFixed(1).padStart(8)}  ${(values.length / searches).toFixed(2).padStart(6)}  ${median(values).toFixed(1).padStart(7)}  ${sql}`,
      );
  }
  await served.stop();
  process.exit(0);
}

/** Calls `onCall` with the SQL and wall µs of every statement the runtime's copy of better-sqlite3 runs. */
function timeSqliteCalls(onCall: (sql: string, us: number) => void): void {
  const fromRoot = createRequire(new URL('../package.json', import.meta.url));
  const Database = fromRoot('better-sqlite3') as new (path: string) => { prepare(sql: string): object };
  const statement = Object.getPrototypeOf(new Database(':memory:').prepare('SELECT 1')) as Record<
    string,
    unknown
  >;
  for (const name of ['run', 'get', 'all', 'iterate']) {
    const call = statement[name] as (...values: unknown[]) => unknown;
    statement[name] = function (this: { source: string }, ...values: unknown[]) {
      const at = performance.now();
      try {
        return call.apply(this, values);
      } finally {
        onCall(this.source.replace(/\s+/g, ' ').slice(0, 110), (performance.now() - at) * 1000);
      }
    };
  }
}
