import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { SqlDatabase, SqlExecutor } from '../../src/store/index.js';
import { openTestDatabase, postgresTestBackend } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

const backend = await postgresTestBackend();

/** Statements (their first words) and socket writes of every pg client while `work` runs. */
async function traced(work: () => Promise<unknown>): Promise<{ statements: string[]; writes: number }> {
  const seen = { statements: [] as string[], writes: 0 };
  const patched = new WeakSet<object>();
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, config: unknown, ...rest: unknown[]) {
    const text = typeof config === 'string' ? config : (config as { text: string }).text;
    seen.statements.push(text.split(/\s+/).slice(0, 3).join(' '));
    const stream = (
      this as unknown as { connection: { stream: Record<string, (...args: unknown[]) => void> } }
    ).connection.stream;
    if (!patched.has(stream)) {
      patched.add(stream);
      for (const method of ['_write', '_writev']) {
        const original = stream[method]!;
        stream[method] = function (this: unknown, ...args: unknown[]) {
          seen.writes++;
          return original.apply(this, args);
        };
      }
    }
    return (query as (...args: unknown[]) => unknown).call(this, config, ...rest);
  } as typeof query;
  try {
    await work();
  } finally {
    pg.Client.prototype.query = query;
  }
  return seen;
}

/** Five appends to a context of at most four: the first entry evicted by the fifth, its tombstone #6. */
async function expectOldestEvicted(db: SqlDatabase, sessionKey: string): Promise<void> {
  const rows = await db.all<{ memory_id: number; state: string }>(
    'SELECT memory_id, state FROM memory_entries WHERE session_key = ? ORDER BY memory_id',
    [sessionKey],
  );
  expect(rows.map((row) => [Number(row.memory_id), row.state])).toEqual([
    [1, 'evicted'],
    [2, 'active'],
    [3, 'active'],
    [4, 'active'],
    [5, 'active'],
    [6, 'tombstone'],
  ]);
}

describe.skipIf(backend.kind !== 'server')('a memory commit on Postgres', () => {
  it('is two round trips: its entries with their ids, an eviction and what the caller adds, then COMMIT', async () => {
    const db = await openTestDatabase('postgres');
    try {
      await db.run('CREATE TABLE caller_rows (id TEXT PRIMARY KEY)');
      const { memory } = createHarness(db, { config: { maxActiveEntries: 4, evictDownToRatio: 1 } });
      const ref = sessionRef();
      for (let index = 0; index < 4; index++)
        await memory.append(ref, { role: 'user', content: `m${index}` });

      const seen = await traced(() =>
        memory.append(ref, { role: 'assistant', content: 'pushes the oldest out' }, async (tx) => {
          await tx.run('INSERT INTO caller_rows (id) VALUES (?)', ['run-1']);
        }),
      );
      // The id reservation and the eviction (state change, event) ride in the entries' INSERT; BEGIN and
      // the statements leave in one write, COMMIT once they are answered and the caller's work resolved.
      expect(seen.statements).toEqual(['BEGIN', 'WITH reserved AS', 'INSERT INTO caller_rows', 'COMMIT']);
      expect(seen.writes).toBe(2);
      expect(await db.all('SELECT id FROM caller_rows')).toEqual([{ id: 'run-1' }]);
      await expectOldestEvicted(db, ref.sessionKey);
      expect(await db.all('SELECT kind, memory_ids FROM memory_events')).toEqual([
        { kind: 'evicted', memory_ids: '[1]' },
      ]);
    } finally {
      await db.close();
    }
  });
});

/** `db` with the first words of every statement its transactions' executors issue noted. */
function recordingTransactions(db: SqlDatabase): { db: SqlDatabase; statements: string[] } {
  const statements: string[] = [];
  const noted = <Result>(sql: string, issue: () => Result): Result => {
    statements.push(sql.split(/\s+/).slice(0, 3).join(' '));
    return issue();
  };
  const recording = (tx: SqlExecutor): SqlExecutor => ({
    dialect: tx.dialect,
    all: (sql, params) => noted(sql, () => tx.all(sql, params)),
    get: (sql, params) => noted(sql, () => tx.get(sql, params)),
    run: (sql, params) => noted(sql, () => tx.run(sql, params)),
  });
  return {
    statements,
    db: { ...db, transaction: (work, options) => db.transaction((tx) => work(recording(tx)), options) },
  };
}

describe('a memory commit on SQLite', () => {
  it('is one INSERT for its entries: the INSERT checks their ids itself, with no read of the next free id before it', async () => {
    const db = await openTestDatabase('sqlite');
    try {
      const recorded = recordingTransactions(db);
      const { memory } = createHarness(recorded.db, { config: { maxActiveEntries: 4, evictDownToRatio: 1 } });
      const ref = sessionRef();
      await memory.append(ref, { role: 'user', content: 'first' });
      recorded.statements.length = 0;
      const second = await memory.append(ref, { role: 'assistant', content: 'second' });
      expect(second.memoryId).toBe(2);
      expect(recorded.statements).toEqual(['INSERT INTO memory_entries']);

      for (let index = 0; index < 2; index++)
        await memory.append(ref, { role: 'user', content: `m${index}` });
      recorded.statements.length = 0;
      await memory.append(ref, { role: 'assistant', content: 'pushes the oldest out' });
      // The eviction's state change and event follow the INSERT; still no read of the next id.
      expect(recorded.statements).toEqual([
        'INSERT INTO memory_entries',
        'UPDATE memory_entries SET',
        'INSERT INTO memory_events',
      ]);
      await expectOldestEvicted(db, ref.sessionKey);
    } finally {
      await db.close();
    }
  });
});
