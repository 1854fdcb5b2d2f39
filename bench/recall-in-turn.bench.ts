// Automatic recall where a chat turn pays for it, at 100,000 memories: bench/chat-turn-recall.ts (the whole
// runtime serving one client whose every turn searches, its agent's memory holding the recall benchmark's
// corpus) run in a child process of its own, its figures sent back with --report. The recall benchmark
// measures the call over the oldest session with nothing written between queries; a chat session's own
// turns are the newest rows and are written between its searches.
import { fork } from 'node:child_process';
import type { RecallInTurnReport, Spread } from './chat-turn-recall.js';
import { assertRuntimeBuilt, runtimeSource } from './runtime-server.js';
import { median } from './stats.js';

const rounds = 6;
const turnsPerRound = 300;

async function measure(): Promise<RecallInTurnReport> {
  const child = fork(
    new URL('./chat-turn-recall.ts', import.meta.url),
    ['--rounds', String(rounds), '--turns', String(turnsPerRound), '--report'],
    { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
  );
  return await new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`chat-turn-recall exited with ${code} before its report`)));
    child.on('message', (message: { type: string; report: RecallInTurnReport }) => {
      if (message.type !== 'report') return;
      child.removeAllListeners('exit');
      resolve(message.report);
    });
  });
}

async function run() {
  assertRuntimeBuilt();
  const report = await measure();
  const spreadRow = (measured: string, spread: Spread) => ({
    measured,
    'p50 µs': Math.round(spread[0]),
    'p90 µs': Math.round(spread[1]),
    'p99 µs': Math.round(spread[2]),
  });
  const perRound = (measured: string, values: number[], digits: number) => ({
    measured,
    'p50 µs': '',
    'p90 µs': '',
    'p99 µs': '',
    'median of rounds': Number(median(values).toFixed(digits)),
    'rounds: least–most': `${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)}`,
  });
  const differences = report.on.map((on, index) => on.cpuUs - report.off[index]!.cpuUs);
  const rows = [
    spreadRow('automatic recall inside the turns, wall', report.inTurn.wallUs),
    spreadRow('automatic recall inside the turns, CPU', report.inTurn.cpuUs),
    spreadRow("the same, after the turn's queued work, wall", report.settled.wallUs),
    spreadRow("the same, after the turn's queued work, CPU", report.settled.cpuUs),
    spreadRow('the same session, searches alone, wall', report.alone.wallUs),
    spreadRow('the same session, searches alone, CPU', report.alone.cpuUs),
    perRound(
      'server CPU a turn, µs: recall every turn',
      report.on.map((round) => round.cpuUs),
      0,
    ),
    perRound(
      'server CPU a turn, µs: recall off',
      report.off.map((round) => round.cpuUs),
      0,
    ),
    perRound('server CPU a turn, µs: on − off, each round pair', differences, 0),
    perRound(
      'turn p50, ms: recall every turn',
      report.on.map((round) => round.p50Ms),
      3,
    ),
    perRound(
      'turn p50, ms: recall off',
      report.off.map((round) => round.p50Ms),
      3,
    ),
  ];
  const notes = [
    `${report.memoryCount.toLocaleString('en')} memories of the served agent in 100 sessions (the recall benchmark's corpus, bench/recall-corpus.ts), ingested in ${report.ingestS.toFixed(1)} s through a memory service on the runtime's own database; the full-text index's ${report.segments} segments merged into one in ${report.mergeS.toFixed(1)} s, as the background merge would.`,
    `The whole runtime (${runtimeSource}) with memory.recall.promptReuseMs ${report.reuseMs}: every turn searches, as a person's turns seconds apart do (by default searches take at most a tenth of the time, which turns sent back to back exceed: past it a session keeps its last block). One client in a process of its own sends questions of the recall benchmark's shape ("what did we say about <topic> and <word> <word>?"), one turn after another: its own earlier questions become the newest matches of the words it repeats, and each turn writes between searches.`,
    `${report.rounds} rounds of ${report.turnsPerRound} turns an arm, alternating recall on and off (off: memory.recallForPrompt answers '' at once), after a warm-up of ${report.warmupTurns.toLocaleString('en')} turns on and ${report.turnsPerRound} off (600 on before 2026-12-06: the search's JavaScript was still being optimised, 112–125 µs p50 inside the turns against 99 after 3,000 or 6,000 in the same hour). Each search inside the "on" rounds' turns is timed (performance.now and process.cpuUsage around the call; ${report.inTurn.calls} calls, ${report.inTurn.withLinesPercent.toFixed(0)} % found lines). Then ${report.alone.calls} searches for the same session alone in a tight loop (the recall benchmark's "alone").`,
    `"After the turn's queued work": a third arm in each round (the same turns, ${report.settled.calls} searches) starts each search one event-loop turn later and only then times it. Timed at once, the window also holds the continuations the turn queued before the search (the acknowledgement of the message on its way to the gateway among them), which run at the search's awaits: their time is the turn's, recall or not.`,
    'The CPU difference between the arms is more than the search: with recall on the prompt is longer and the local model reads the recalled block.',
    'Target: automatic recall ≤ 100 µs a turn at 100,000 memories (bench/results/profiles/chat-turn-recall-round43.md for where the time goes, `bench/chat-turn-recall.ts --statements`).',
  ];
  return { rows, notes };
}

export default {
  name: 'recall-in-turn',
  description:
    'automatic recall inside served chat turns that each search, over 100,000 memories: the search in the turn and alone, the turn with and without it',
  run,
};
