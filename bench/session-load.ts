// How long the memory service takes to load a session instance into RAM from SQLite: a long session (many
// turns, most of them evicted, each leaving a tombstone) and a short one, each unloaded and loaded again. Runs
// a tree's compiled dist/ (the current one unless a path is given), so two builds can be compared in
// alternation. A diagnostic, not a benchmark module (`npm run bench` does not run it):
//   npm run build && npx tsx bench/session-load.ts [tree] [--turns 5000] [--loads 200]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { takeFlag } from './args.js';
import { percentile } from './stats.js';

const args = process.argv.slice(2);
const turns = Number(takeFlag(args, '--turns') ?? 5_000);
const loads = Number(takeFlag(args, '--loads') ?? 200);
const tree = resolve(args[0] ?? '.');
const load = (path: string) => import(pathToFileURL(join(tree, 'dist', path)).href);

const { createSqliteDatabase, migrate } = await load('store/index.js');
const { createMemoryService } = await load('memory/index.js');
const { createBus } = await load('bus/index.js');

interface Ref {
  sessionId: string;
  sessionKey: string;
  agentId: string;
}
const refOf = (key: string): Ref => ({
  sessionId: `s-${key}`,
  sessionKey: `agent:main:${key}`,
  agentId: 'main',
});

const dir = mkdtempSync(join(tmpdir(), 'agentd-session-load-'));
const db = createSqliteDatabase({ path: join(dir, 'agentd.db') });
try {
  await migrate(db);
  const memory = createMemoryService({ db, bus: createBus() });
  const turn = (index: number) => [
    { role: 'user', content: `question ${index} about the garden` },
    { role: 'assistant', content: `answer ${index}: water the roses` },
  ];
  for (let index = 0; index < turns; index++) await memory.appendBatch(refOf('long'), turn(index));
  for (let session = 0; session < 200; session++)
    for (let index = 0; index < 10; index++) await memory.appendBatch(refOf(`short${session}`), turn(index));

  const timeLoads = async (key: string, count: number) => {
    const micros: number[] = [];
    for (let index = 0; index < count; index++) {
      await memory.unload(refOf(key).sessionId);
      const started = process.hrtime.bigint();
      await memory.load(refOf(key));
      micros.push(Number(process.hrtime.bigint() - started) / 1_000);
    }
    micros.sort((left, right) => left - right);
    return `p50 ${Math.round(percentile(micros, 50))} µs, p90 ${Math.round(percentile(micros, 90))} µs`;
  };
  await timeLoads('long', 20);
  const rows = await db.get('SELECT count(*) AS n FROM memory_entries');
  console.log(
    `${tree}: ${rows.n} rows; a session of ${turns} turns loads in ${await timeLoads('long', loads)}; ` +
      `one of 10 turns in ${await timeLoads('short7', loads)}`,
  );
} finally {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
}
