// Interleaved A/B of the chat turn between builds of agentd: the whole runtime of each tree
// (bench/chat-turn.bench.ts's sqlite server role, from that tree's dist/) serves one client (or --clients N)
// in many short rounds, the servers taking turns, the order reversed every other round. On a shared VM the
// CPU a turn of one server varies by tens of percent from one second to the next, so only many interleaved
// rounds show a change of a few percent; and two processes of the same tree measured 1,022 and 1,333 µs a
// turn over the same rounds (their JIT and heap differ from process to process), so each tree runs in several
// processes and a round compares the trees' means over their processes. At 100 clients too: one process of
// each of two builds, alternating, put one ahead by 12–18% in four runs running, which three processes of
// each, the same builds, did not confirm (×0.97–1.08 the other way; bench/results/profiles/chat-turn-round27.md).
// With --postgres <url> the servers run on Postgres (the benchmark's postgres role), each process in a fresh
// schema of that database, vacuumed and analysed after its warm-up (the machine's Postgres may run without
// autovacuum) and dropped at the end. With --paced <turns/s> the clients offer that rate together
// (bench/chat-turn-driver.ts's pacedLoop) instead of the closed loop: a change's effect at a given load.
// With --idle-sessions N each server first holds N idle sessions of two turns each (its clients gone), as a
// server does after a busy hour: what a turn costs with many sessions loaded.
// Not a benchmark module (`npm run bench` does not run it):
//   git worktree add /tmp/before <rev> && ln -s "$PWD/node_modules" /tmp/before/node_modules \
//     && ln -s "$PWD/bench/node_modules" /tmp/before/bench/node_modules && (cd /tmp/before && npx tsc -p tsconfig.build.json)
//   npx tsx bench/chat-turn-ab.ts /tmp/before . [--rounds 30] [--round-ms 400] [--processes 3] [--clients 1]
//     [--paced 1500] [--idle-sessions 1000] [--postgres postgres://root@127.0.0.1:5432/test]
// A tree named as `KEY=VALUE,…@<tree>` runs its servers with those variables set (bench/tree-ab.ts's treeSpecsFrom).
import { pathToFileURL } from 'node:url';
import { takeFlag } from './args.js';
import {
  fillIdleSessions,
  interleavedRoundsOf,
  type RoundFigures,
  roundMeansBy,
  startTarget,
  type Target,
  warmUp,
} from './chat-turn-driver.js';
import { type BenchSchema, freshPostgresSchema } from './postgres-schema.js';
import { median } from './stats.js';
import { treeSpecsFrom } from './tree-ab.js';

const args = process.argv.slice(2);
const rounds = Number(takeFlag(args, '--rounds') ?? 30);
const processes = Number(takeFlag(args, '--processes') ?? 3);
const roundMs = Number(takeFlag(args, '--round-ms') ?? 400);
const clients = Number(takeFlag(args, '--clients') ?? 1);
const paced = takeFlag(args, '--paced');
const postgresUrl = takeFlag(args, '--postgres');
const idleSessions = Number(takeFlag(args, '--idle-sessions') ?? 0);
const roundWarmupMs = 300;
/** Each server first serves 10 clients this long, as the benchmark's do, so its code is optimised. */
const serverWarmupMs = 12_000;
const treeSpecs = treeSpecsFrom(
  args,
  'chat-turn-ab <tree> <tree> [...] [--rounds 30] [--round-ms 400] [--processes 3] [--clients 1] [--paced <turns/s>] [--idle-sessions <n>] [--postgres <url>]',
);

const schemas: BenchSchema[] = [];
/** A fresh schema of the --postgres database for one server process. */
const freshSchema = async (): Promise<BenchSchema> => {
  const schema = await freshPostgresSchema(postgresUrl!, 'agentd_ab');
  if (!schema) {
    console.error(`chat-turn-ab: ${postgresUrl} did not answer`);
    process.exit(2);
  }
  schemas.push(schema);
  return schema;
};

const targets: Target[] = [];
/** Which of `trees` each target runs (a tree may be named twice, to see the noise of the method). */
const treeOf = new Map<Target, number>();
// Processes of different trees start alternately, so none is warmed up in a quieter minute than the rest.
for (let copy = 0; copy < processes; copy++) {
  for (const [index, { dir, env, label }] of treeSpecs.entries()) {
    const schema = postgresUrl ? await freshSchema() : undefined;
    const target = await startTarget({
      moduleUrl: pathToFileURL(`${dir}/bench/chat-turn.bench.ts`).href,
      role: schema ? 'postgres' : 'sqlite',
      name: label,
      env: { ...env, ...(schema ? { AGENTD_BENCH_DATABASE_URL: schema.url } : {}) },
    });
    await warmUp(target, serverWarmupMs);
    if (idleSessions > 0)
      await fillIdleSessions(target, { sessions: idleSessions, turnsPerSession: 2, clients: 100 });
    await schema?.vacuum();
    targets.push(target);
    treeOf.set(target, index);
  }
}
const figures = await interleavedRoundsOf(targets, {
  rounds,
  roundMs,
  warmupMs: roundWarmupMs,
  clients,
  ...(paced === undefined ? {} : { pacedTurnsPerSecond: Number(paced) }),
});
const byTree = roundMeansBy(figures, (target) => treeOf.get(target)!);
const processesOf = (index: number) => targets.filter((target) => treeOf.get(target) === index);
const treeRounds = (index: number, of: (figures: RoundFigures) => number[]) => of(byTree.get(index)!);
const firstCpu = treeRounds(0, (own) => own.cpuPerTurnUs);
const firstTurnsPerS = treeRounds(0, (own) => own.turnsPerS);
console.log(
  `${rounds} interleaved rounds of ${roundMs} ms after ${roundWarmupMs} ms, ${clients} client(s) per server${paced === undefined ? '' : ` offering ${paced} turns/s`}, ${processes} server processes per tree (each warmed up ${serverWarmupMs} ms at 10 clients${idleSessions > 0 ? `, then holding ${idleSessions} idle sessions of 2 turns` : ''})${postgresUrl ? ', on Postgres' : ''}:`,
);
for (const [index, { label }] of treeSpecs.entries()) {
  const cpu = treeRounds(index, (own) => own.cpuPerTurnUs);
  const p50 = treeRounds(index, (own) => own.p50Ms);
  const p99 = treeRounds(index, (own) => own.p99Ms);
  const turnsPerS = treeRounds(index, (own) => own.turnsPerS);
  const perProcess = processesOf(index).map((target) =>
    Math.round(median(figures.get(target)!.cpuPerTurnUs)),
  );
  console.log(
    `${label}: CPU a turn median ${Math.round(median(cpu))} µs (its processes' medians ${perProcess.join(', ')}), p50 median ${median(p50).toFixed(3)} ms, p99 median ${median(p99).toFixed(3)} ms, ${Math.round(median(turnsPerS))} turns/s; ` +
      `per round ÷ the first tree's: CPU median ×${median(cpu.map((value, round) => value / firstCpu[round]!)).toFixed(3)}, turns/s ×${median(turnsPerS.map((value, round) => value / firstTurnsPerS[round]!)).toFixed(3)}`,
  );
}
await Promise.all(targets.map((target) => target.stop()));
for (const schema of schemas) await schema.drop();
