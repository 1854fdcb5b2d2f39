import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { createMemoryService, type MemoryService, type SessionRef } from '../../src/memory/index.js';
import type { SqlDatabase, SqlExecutor } from '../../src/store/index.js';
import { createRecordingLogger } from '../../src/util/index.js';
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
  it('is one statement: its entries with their ids, an eviction and what the caller adds, with no transaction', async () => {
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
      // The id reservation, the eviction (state change, event) and the caller's row ride in the entries'
      // INSERT as CTEs: one statement, committed on its own, in one write.
      expect(seen.statements).toEqual(['WITH reserved AS']);
      expect(seen.writes).toBe(1);
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

describe.skipIf(backend.kind !== 'server')("a memory commit on Postgres with its caller's statements", () => {
  interface Setup {
    db: SqlDatabase;
    memory: MemoryService;
    ref: SessionRef;
    /** The caller's table. */
    callerRows(): Promise<unknown[]>;
    /** The session key's entries' contents, in id order. */
    contents(): Promise<string[]>;
  }
  /**
   * Runs `test` on a fresh database with the caller's table (`caller_rows`) and a session whose first entry,
   * "stored", is committed: the commits the test makes are a loaded session's. `memoryOn` makes the service.
   */
  const inLoadedSession = async (
    test: (setup: Setup) => Promise<void>,
    memoryOn: (db: SqlDatabase) => MemoryService = (db) => createHarness(db).memory,
  ) => {
    const db = await openTestDatabase('postgres');
    try {
      await db.run('CREATE TABLE caller_rows (id TEXT PRIMARY KEY, n INTEGER NOT NULL DEFAULT 0)');
      const memory = memoryOn(db);
      const ref = sessionRef();
      await memory.append(ref, { role: 'user', content: 'stored' });
      await test({
        db,
        memory,
        ref,
        callerRows: () => db.all('SELECT id, n FROM caller_rows ORDER BY id'),
        contents: async () =>
          (
            await db.all<{ content: string }>(
              'SELECT content FROM memory_entries WHERE session_key = ? ORDER BY memory_id',
              [ref.sessionKey],
            )
          ).map((row) => row.content),
      });
    } finally {
      await db.close();
    }
  };

  it("hands the caller its statements' answers once the commit is stored", () =>
    inLoadedSession(async ({ db, memory, ref, callerRows }) => {
      await db.run("INSERT INTO caller_rows (id) VALUES ('present')");
      const changes: number[] = [];
      const seen = await traced(() =>
        memory.append(ref, { role: 'assistant', content: 'with updates' }, async (tx) => {
          const answers = await Promise.all([
            tx.run("UPDATE caller_rows SET n = n + 1 WHERE id = 'present'"),
            tx.run("DELETE FROM kv WHERE namespace = 'none'"),
          ]);
          changes.push(...answers.map((answer) => answer.changes));
        }),
      );
      expect(seen.statements).toEqual(['WITH reserved AS']);
      expect(changes).toEqual([1, 0]);
      expect(await callerRows()).toEqual([{ id: 'present', n: 1 }]);
    }));

  it('sends in a transaction, COMMIT with them, what cannot fold into the INSERT', () =>
    inLoadedSession(async ({ memory, ref, callerRows, contents }) => {
      let read: unknown;
      const seen = await traced(() =>
        memory.append(ref, { role: 'assistant', content: 'second' }, async (tx) => {
          // Two statements on one table, and a read: CTEs of one statement would not see each other's rows.
          const [, , rows] = await Promise.all([
            tx.run("INSERT INTO caller_rows (id) VALUES ('a')"),
            tx.run("UPDATE caller_rows SET n = 5 WHERE id = 'a'"),
            tx.all('SELECT id, n FROM caller_rows'),
          ]);
          read = rows;
        }),
      );
      expect(seen.statements).toEqual([
        'BEGIN',
        'WITH reserved AS',
        'INSERT INTO caller_rows',
        'UPDATE caller_rows SET',
        'SELECT id, n',
        'COMMIT',
      ]);
      expect(seen.writes).toBe(1);
      // In order, as statements of one transaction: the read sees the row and its update.
      expect(read).toEqual([{ id: 'a', n: 5 }]);
      expect(await callerRows()).toEqual([{ id: 'a', n: 5 }]);
      expect(await contents()).toEqual(['stored', 'second']);
    }));

  it('stores nothing when a statement of the caller fails on the server', () =>
    inLoadedSession(async ({ db, memory, ref, callerRows, contents }) => {
      await db.run("INSERT INTO caller_rows (id) VALUES ('taken')");
      await expect(
        memory.append(
          ref,
          { role: 'assistant', content: 'not stored' },
          async (tx) => {
            await tx.run("INSERT INTO caller_rows (id) VALUES ('taken')");
          },
          { requireCommit: true },
        ),
      ).rejects.toMatchObject({ code: '23505' });
      expect(await contents()).toEqual(['stored']);
      expect(await callerRows()).toEqual([{ id: 'taken', n: 0 }]);
    }));

  it('stores nothing when what the caller adds throws while it issues its statements', () =>
    inLoadedSession(async ({ memory, ref, callerRows, contents }) => {
      await expect(
        memory.append(
          ref,
          { role: 'assistant', content: 'not stored' },
          async (tx) => {
            tx.run("INSERT INTO caller_rows (id) VALUES ('run-1')").catch(() => {});
            throw new Error('the caller failed before its first await');
          },
          { requireCommit: true },
        ),
      ).rejects.toThrow('the caller failed before its first await');
      // Neither the entry nor the caller's row: nothing was sent.
      expect(await callerRows()).toEqual([]);
      expect(await contents()).toEqual(['stored']);
    }));

  it('refuses a statement issued after an await, and says so, with the commit stored', async () => {
    const logger = createRecordingLogger();
    await inLoadedSession(
      async ({ memory, ref, callerRows, contents }) => {
        const entry = await memory.append(ref, { role: 'assistant', content: 'answer' }, async (tx) => {
          await tx.run("INSERT INTO caller_rows (id) VALUES ('first')");
          await tx.run("INSERT INTO caller_rows (id) VALUES ('late')");
        });
        expect(entry.memoryId).toBe(2);
        expect(await contents()).toEqual(['stored', 'answer']);
        expect(await callerRows()).toEqual([{ id: 'first', n: 0 }]);
        const errors = logger.records.filter((record) => record.level === 'error');
        expect(errors.map((record) => record.message)).toEqual([
          'what a memory commit added failed after the commit was stored',
        ]);
        expect(String((errors[0]!.object.err as Error).message)).toMatch(/issued after the memory commit/);
        // RAM and the database agree: the next commit takes the next id.
        expect((await memory.append(ref, { role: 'user', content: 'next' })).memoryId).toBe(3);
      },
      (db) => createMemoryService({ db, bus: createBus(), logger }),
    );
  });

  it("folds the caller's statements again, once, when another writer took the commit's ids", () =>
    inLoadedSession(async ({ db, memory, ref, callerRows, contents }) => {
      // Another process writes the same key: ids 2 and 3 are its.
      await createHarness(db).memory.appendBatch(ref, [
        { role: 'user', content: 'other 2' },
        { role: 'assistant', content: 'other 3' },
      ]);
      const changes: number[] = [];
      const entry = await memory.append(ref, { role: 'assistant', content: 'mine 4' }, async (tx) => {
        changes.push((await tx.run("INSERT INTO caller_rows (id) VALUES ('once')")).changes);
      });
      expect(entry.memoryId).toBe(4);
      expect(changes).toEqual([1]);
      expect(await callerRows()).toEqual([{ id: 'once', n: 0 }]);
      expect(await contents()).toEqual(['stored', 'other 2', 'other 3', 'mine 4']);
    }));
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
