// Store overhead: the async SqlDatabase layer over better-sqlite3 against calling the driver directly, on
// the same file, plus the throughput of the core aggregates. Bounded: a few seconds in total.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createSqliteDatabase, createStore } from '../src/store/index.js';

const iterations = 20_000;

const repeats = 3;

/** Best of `repeats` runs (after `reset`), so one hiccup on a shared machine does not decide the figure. */
async function time(work: () => Promise<void> | void, reset?: () => Promise<void> | void): Promise<number> {
  let best = Number.POSITIVE_INFINITY;
  for (let attempt = 0; attempt < repeats; attempt++) {
    await reset?.();
    const start = performance.now();
    await work();
    best = Math.min(best, performance.now() - start);
  }
  return best;
}

function perOp(totalMs: number, count: number): number {
  return Number(((totalMs * 1_000) / count).toFixed(2));
}

async function run() {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-bench-store-'));
  try {
    const rows: Array<Record<string, string | number>> = [];

    // Point reads and single-row inserts: raw driver vs SqlDatabase, same pragmas, separate files.
    const raw = new Database(join(dir, 'raw.db'));
    raw.pragma('journal_mode = WAL');
    raw.pragma('synchronous = NORMAL');
    raw.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)');
    const db = createSqliteDatabase({ path: join(dir, 'layer.db') });
    await db.run('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)');

    const rawInsert = raw.prepare('INSERT INTO t (id, v) VALUES (?, ?)');
    const rawInsertMs = await time(
      () => {
        raw.transaction(() => {
          for (let index = 0; index < iterations; index++) rawInsert.run(index, `value ${index}`);
        })();
      },
      () => {
        raw.exec('DELETE FROM t');
      },
    );
    const layerInsertMs = await time(
      () =>
        db.transaction(async (tx) => {
          for (let index = 0; index < iterations; index++) {
            await tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [index, `value ${index}`]);
          }
        }),
      async () => {
        await db.run('DELETE FROM t');
      },
    );
    rows.push({
      operation: `insert x${iterations} in one transaction`,
      'raw driver µs/op': perOp(rawInsertMs, iterations),
      'SqlDatabase µs/op': perOp(layerInsertMs, iterations),
      ratio: Number((layerInsertMs / rawInsertMs).toFixed(2)),
    });

    const rawGet = raw.prepare('SELECT id, v FROM t WHERE id = ?');
    const rawGetMs = await time(() => {
      for (let index = 0; index < iterations; index++) rawGet.get(index);
    });
    const layerGetMs = await time(async () => {
      for (let index = 0; index < iterations; index++)
        await db.get('SELECT id, v FROM t WHERE id = ?', [index]);
    });
    rows.push({
      operation: `point read x${iterations}`,
      'raw driver µs/op': perOp(rawGetMs, iterations),
      'SqlDatabase µs/op': perOp(layerGetMs, iterations),
      ratio: Number((layerGetMs / rawGetMs).toFixed(2)),
    });
    raw.close();
    await db.close();

    // Aggregates on a real store file.
    const store = await createStore({ stateDir: join(dir, 'state') });
    const sessionCount = 2_000;
    const ensureMs = await time(async () => {
      for (let index = 0; index < sessionCount; index++)
        await store.sessions.ensureActive(`agent:main:s${index}`, 'main');
    });
    rows.push({
      operation: `sessions.ensureActive (create) x${sessionCount}`,
      'SqlDatabase µs/op': perOp(ensureMs, sessionCount),
    });
    const session = await store.sessions.ensureActive('agent:main:s0', 'main');
    const touchMs = await time(async () => {
      for (let index = 0; index < sessionCount; index++)
        await store.sessions.touch(session.id, { messageDelta: 1 });
    });
    rows.push({
      operation: `sessions.touch (autocommit) x${sessionCount}`,
      'SqlDatabase µs/op': perOp(touchMs, sessionCount),
    });
    const events = Array.from({ length: 10_000 }, (_, index) => ({
      type: 'run:tool-finished',
      at: index,
      runId: `run_${index % 50}`,
      data: { toolName: 'echo', result: 'ok', durationMs: 1 },
    }));
    const appendMs = await time(async () => {
      await store.events.appendMany(events);
    });
    rows.push({ operation: 'events.appendMany x10000', 'SqlDatabase µs/op': perOp(appendMs, events.length) });
    await store.close();

    return {
      rows,
      notes: [
        'SQLite file in WAL mode with synchronous=NORMAL on the local disk; single process, no contention.',
        `Each figure is the best of ${repeats} runs.`,
        'ratio = SqlDatabase time / raw better-sqlite3 time for the same statements.',
      ],
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export default {
  name: 'store',
  description: 'SqlDatabase overhead over raw better-sqlite3, and core aggregate throughput on a SQLite file',
  run,
};
