import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { createPostgresDatabase, type PostgresDatabase } from '../../src/store/index.js';
import { createRecordingLogger, type Logger } from '../../src/util/index.js';
import { postgresTestBackend } from '../helpers/databases.js';

const backend = await postgresTestBackend();

describe.skipIf(backend.kind !== 'server')(
  'Postgres connections: prepared statements, pipelining, transactions',
  () => {
    const url = backend.kind === 'server' ? backend.url : '';
    const opened: Array<{ db: PostgresDatabase; schema: string }> = [];
    afterEach(async () => {
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      for (const { db, schema } of opened.splice(0)) {
        await db.close();
        await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      }
      await admin.end();
    });

    /** One connection, so the session's prepared statements are the ones every query used. */
    const open = async (maxPreparedStatements?: number, logger?: Logger) => {
      // The creation time comes first: other test files drop `agentd_t_<time>_…` schemas older than an hour,
      // and a name starting with a word read as base-36 time ("prep") looked decades old to them.
      const schema = `agentd_t_${Date.now().toString(36)}_prep_${process.pid}_${opened.length}`;
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query(`CREATE SCHEMA ${schema}`);
      await admin.end();
      const db = createPostgresDatabase({
        connectionString: url,
        schema,
        poolSize: 1,
        ...(maxPreparedStatements === undefined ? {} : { maxPreparedStatements }),
        ...(logger ? { logger } : {}),
      });
      opened.push({ db, schema });
      await db.run('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)');
      return db;
    };
    /** An advisory lock key of this run alone: others may run this file against the same server at once. */
    const lockKey = 1_000_000 + (process.pid % 1_000_000);
    const preparedOn = async (db: PostgresDatabase) =>
      (
        await db.all<{ name: string; statement: string }>(
          'SELECT name, statement FROM pg_prepared_statements ORDER BY name',
        )
      ).map((row) => `${row.name}: ${row.statement}`);

    it('prepares a statement by name from its second run, with the same results', async () => {
      const db = await open();
      const insert = 'INSERT INTO t (id, v) VALUES (?, ?)';
      await db.run(insert, [1, 'one']);
      expect(await preparedOn(db)).toEqual([]);
      expect(await db.run(insert, [2, 'two'])).toEqual({ changes: 1 });
      expect(await db.run(insert, [3, 'three'])).toEqual({ changes: 1 });
      expect(await preparedOn(db)).toEqual(['agentd_1: INSERT INTO t (id, v) VALUES ($1, $2)']);

      const select = 'SELECT v FROM t WHERE id >= ? ORDER BY id';
      expect(await db.all(select, [2])).toEqual([{ v: 'two' }, { v: 'three' }]);
      expect(await db.all(select, [3])).toEqual([{ v: 'three' }]);
      expect(await db.get(select, [1])).toEqual({ v: 'one' });
      expect(await preparedOn(db)).toContain('agentd_2: SELECT v FROM t WHERE id >= $1 ORDER BY id');

      // A transaction's statements use the same names on its connection.
      await db.transaction(async (tx) => {
        await tx.run(insert, [4, 'four']);
        expect(await tx.all(select, [4])).toEqual([{ v: 'four' }]);
      });
      expect((await preparedOn(db)).filter((line) => line.startsWith('agentd_'))).toHaveLength(2);
    });

    it('runs texts past the limit unnamed, and names none with a limit of 0', async () => {
      const limited = await open(1);
      for (let run = 0; run < 3; run++) {
        await limited.get('SELECT ? AS a', [run]);
        expect(await limited.get('SELECT ?::int + 1 AS b', [run])).toEqual({ b: run + 1 });
      }
      expect(await preparedOn(limited)).toEqual(['agentd_1: SELECT $1 AS a']);

      const off = await open(0);
      for (let run = 0; run < 3; run++) await off.get('SELECT ? AS a', [run]);
      expect(await preparedOn(off)).toEqual([]);
    });

    it('reports a statement that fails to prepare and still runs the good ones', async () => {
      const db = await open();
      const bad = 'INSERT INTO missing_table (id) VALUES (?)';
      for (let run = 0; run < 3; run++)
        await expect(db.run(bad, [run])).rejects.toMatchObject({ code: '42P01' });
      const insert = 'INSERT INTO t (id, v) VALUES (?, ?)';
      for (let id = 1; id <= 3; id++) await db.run(insert, [id, `v${id}`]);
      expect(await db.get('SELECT count(*) AS n FROM t', [])).toEqual({ n: 3 });
    });

    it('keeps a transaction atomic while its statements are pipelined', async () => {
      const db = await open();
      const insert = 'INSERT INTO t (id, v) VALUES (?, ?)';
      const seen = await db.transaction(async (tx) => {
        // Issued together: they share round trips, and still run in order.
        await Promise.all([tx.run(insert, [1, 'a']), tx.run(insert, [2, 'b']), tx.run(insert, [3, 'c'])]);
        const inside = await tx.all<{ id: number }>('SELECT id FROM t ORDER BY id');
        // Another connection does not see them before COMMIT.
        const other = new pg.Client({ connectionString: url });
        await other.connect();
        try {
          const outside = await other.query(`SELECT count(*)::int AS n FROM ${opened.at(-1)!.schema}.t`);
          return { inside: inside.map((row) => row.id), outside: outside.rows[0].n as number };
        } finally {
          await other.end();
        }
      });
      expect(seen).toEqual({ inside: [1, 2, 3], outside: 0 });
      expect(await db.get('SELECT count(*) AS n FROM t')).toEqual({ n: 3 });

      // One failing statement among pipelined ones fails the transaction, and none of them is stored.
      await expect(
        db.transaction((tx) =>
          Promise.all([tx.run(insert, [4, 'd']), tx.run(insert, [1, 'duplicate']), tx.run(insert, [5, 'e'])]),
        ),
      ).rejects.toMatchObject({ code: '23505' });
      expect(await db.get('SELECT count(*) AS n FROM t')).toEqual({ n: 3 });
    });

    /** Counts the socket writes of the pool's one connection (each is a round trip's outbound half). */
    const countWrites = async (db: PostgresDatabase) => {
      const client = await db.pool.connect();
      const stream = (client as unknown as { connection: { stream: Record<string, unknown> } }).connection
        .stream as { _write: (...args: unknown[]) => void; _writev: (...args: unknown[]) => void };
      client.release();
      const counter = { writes: 0 };
      for (const method of ['_write', '_writev'] as const) {
        const original = stream[method];
        stream[method] = function (this: unknown, ...args: unknown[]) {
          counter.writes++;
          return original.apply(this, args);
        };
      }
      return counter;
    };

    it('sends BEGIN with the statements, and COMMIT only once the work has resolved', async () => {
      const db = await open();
      const insert = 'INSERT INTO t (id, v) VALUES (?, ?)';
      const counter = await countWrites(db);
      await db.transaction((tx) => Promise.all([tx.run(insert, [1, 'a']), tx.run(insert, [2, 'b'])]));
      // BEGIN and both statements in one write, COMMIT in another after their answers.
      expect(counter.writes).toBe(2);
      // Work that fails in JavaScript after its statements went out leaves nothing stored.
      await expect(
        db.transaction(async (tx) => {
          await Promise.all([tx.run(insert, [3, 'c']), tx.run(insert, [4, 'd'])]);
          throw new Error('the work failed after its statements');
        }),
      ).rejects.toThrow('the work failed after its statements');
      expect(await db.all('SELECT id FROM t ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);
    });

    it('sends COMMIT right behind the statements once the work says all are issued (commitWhenIssued)', async () => {
      const logger = createRecordingLogger();
      const db = await open(undefined, logger);
      const insert = 'INSERT INTO t (id, v) VALUES (?, ?)';
      const counter = await countWrites(db);
      const stored = await db.transaction(async (tx) => {
        const both = Promise.all([tx.run(insert, [1, 'a']), tx.run(insert, [2, 'b'])]);
        tx.commitWhenIssued?.();
        await both;
        return 'stored';
      });
      expect(stored).toBe('stored');
      // BEGIN, both statements and COMMIT in one write.
      expect(counter.writes).toBe(1);
      expect(await db.all('SELECT id FROM t ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);

      // A statement the server refuses aborts the transaction: the COMMIT sent ahead rolls it back, and the
      // work's failure (the statement's error) is what the caller hears.
      await expect(
        db.transaction(async (tx) => {
          const statements = Promise.all([tx.run(insert, [3, 'c']), tx.run(insert, [1, 'duplicate'])]);
          tx.commitWhenIssued?.();
          await statements;
        }),
      ).rejects.toMatchObject({ code: '23505' });
      expect(await db.all('SELECT id FROM t ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);

      // A statement after COMMIT has gone out is refused before it is sent.
      await expect(
        db.transaction(async (tx) => {
          const first = tx.run(insert, [4, 'd']);
          tx.commitWhenIssued?.();
          await first;
          await tx.run(insert, [5, 'late']);
        }),
      ).rejects.toMatchObject({ code: 'INTERNAL' });
      // What went before it is committed, and that breach of the contract is logged as an error.
      expect(await db.all('SELECT id FROM t ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }, { id: 4 }]);
      expect(
        logger.records.filter((record) => record.level === 'error').map((record) => record.message),
      ).toEqual([
        'a transaction failed after it sent COMMIT ahead (commitWhenIssued); its statements are committed',
      ]);

      // Nested transactions (savepoints) have no COMMIT of their own to send.
      await db.transaction(async () => {
        await db.transaction(async (inner) => {
          expect(inner.commitWhenIssued).toBeUndefined();
          await inner.run(insert, [6, 'nested']);
        });
      });
      expect(await db.get('SELECT v FROM t WHERE id = 6')).toEqual({ v: 'nested' });
    });

    it('hands the connection to the next transaction with COMMIT in flight, each reporting its own outcome', async () => {
      const db = await open();
      const insert = 'INSERT INTO t (id, v) VALUES (?, ?)';
      const counter = await countWrites(db);
      // Two transactions on the one connection: the second's BEGIN and statements leave in the same write
      // as the first's COMMIT, not after its answer (4 writes when the connection waited for it).
      await Promise.all([
        db.transaction((tx) => Promise.all([tx.run(insert, [1, 'a']), tx.run(insert, [2, 'b'])])),
        db.transaction((tx) => Promise.all([tx.run(insert, [3, 'c']), tx.run(insert, [4, 'd'])])),
      ]);
      expect(counter.writes).toBe(3);
      expect(await db.all('SELECT id FROM t ORDER BY id')).toEqual([
        { id: 1 },
        { id: 2 },
        { id: 3 },
        { id: 4 },
      ]);

      // A COMMIT that Postgres answers with ROLLBACK fails only its own transaction, not the one pipelined
      // behind it, and a failed one ahead leaves the next one's writes intact.
      const outcomes = await Promise.allSettled([
        db.transaction(async (tx) => {
          await tx.run(insert, [5, 'lost']);
          await tx.run(insert, [1, 'duplicate']).catch(() => {});
        }),
        db.transaction((tx) => tx.run(insert, [6, 'kept'])),
        db.transaction(async (tx) => {
          await tx.run(insert, [7, 'lost']);
          throw new Error('the work failed after its statement');
        }),
        db.transaction((tx) => tx.run(insert, [8, 'kept'])),
      ]);
      expect(outcomes.map((outcome) => outcome.status)).toEqual([
        'rejected',
        'fulfilled',
        'rejected',
        'fulfilled',
      ]);
      expect(outcomes[0]).toMatchObject({ reason: { code: 'STORE_UNAVAILABLE' } });
      expect(await db.all('SELECT id FROM t WHERE id > 4 ORDER BY id')).toEqual([{ id: 6 }, { id: 8 }]);
    });

    it('reports a commit only once Postgres has answered it, with the connection already serving others', async () => {
      const db = await open();
      const schema = opened.at(-1)!.schema;
      // A deferred constraint trigger runs at COMMIT; it waits for an advisory lock another session holds,
      // so the COMMIT stays unanswered until the test lets it go.
      await db.run(`CREATE FUNCTION ${schema}.wait_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_advisory_xact_lock(${lockKey}); RETURN NULL; END $$`);
      await db.run(
        `CREATE CONSTRAINT TRIGGER wait_at_commit AFTER INSERT ON t DEFERRABLE INITIALLY DEFERRED
         FOR EACH ROW WHEN (NEW.v = 'slow') EXECUTE FUNCTION ${schema}.wait_at_commit()`,
      );
      const holder = new pg.Client({ connectionString: url });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query(`SELECT pg_advisory_xact_lock(${lockKey})`);
        let slowSettled = false;
        const slow = db
          .transaction((tx) => tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [1, 'slow']))
          .finally(() => {
            slowSettled = true;
          });
        let nextStarted = false;
        const next = db.transaction(async (tx) => {
          nextStarted = true;
          await tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [2, 'next']);
        });
        // Once the COMMIT waits inside Postgres, the next transaction already has the connection; the first
        // has not been told it committed.
        for (;;) {
          const waiting = await holder.query(
            `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = ${lockKey} AND NOT granted`,
          );
          if (waiting.rows[0].n > 0) break;
          await new Promise((resolve) => setImmediate(resolve));
        }
        expect(nextStarted).toBe(true);
        expect(slowSettled).toBe(false);
        await holder.query('COMMIT');
        await Promise.all([slow, next]);
      } finally {
        await holder.end();
      }
      expect(await db.all('SELECT id FROM t ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);
    });

    it('returns the connection of a statement outside a transaction to the pool once sent while others wait', async () => {
      const db = await open();
      const holder = new pg.Client({ connectionString: url });
      await holder.connect();
      try {
        await holder.query(`SELECT pg_advisory_lock(${lockKey})`);
        // The one connection's statement waits inside Postgres for the lock; meanwhile the pool has handed
        // the connection on, and the transaction's statements are pipelined behind it.
        const blocked = db.get<{ v: string }>(
          `SELECT 'after the lock' AS v FROM pg_advisory_lock(${lockKey})`,
        );
        let workStarted = false;
        const next = db.transaction(async (tx) => {
          workStarted = true;
          await tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [1, 'behind']);
        });
        for (;;) {
          const waiting = await holder.query(
            `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = ${lockKey} AND NOT granted`,
          );
          if (waiting.rows[0].n > 0) break;
          await new Promise((resolve) => setImmediate(resolve));
        }
        expect(workStarted).toBe(true);
        await holder.query(`SELECT pg_advisory_unlock(${lockKey})`);
        expect(await blocked).toEqual({ v: 'after the lock' });
        await next;
      } finally {
        await holder.end();
      }
      // Failures still reach the statement's caller, and the connection keeps serving.
      await expect(db.run('INSERT INTO missing_table (id) VALUES (?)', [1])).rejects.toMatchObject({
        code: '42P01',
      });
      expect(await db.all('SELECT id, v FROM t')).toEqual([{ id: 1, v: 'behind' }]);
    });

    it('holds the connection of a statement until its answer while no one waits for the pool', async () => {
      const db = await open();
      await db.get('SELECT 1 AS one');
      const holder = new pg.Client({ connectionString: url });
      await holder.connect();
      try {
        await holder.query(`SELECT pg_advisory_lock(${lockKey})`);
        const blocked = db.get(`SELECT 1 AS one FROM pg_advisory_lock(${lockKey})`);
        for (;;) {
          const waiting = await holder.query(
            `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = ${lockKey} AND NOT granted`,
          );
          if (waiting.rows[0].n > 0) break;
          await new Promise((resolve) => setImmediate(resolve));
        }
        // Not counted idle with its statement in flight: the pool neither hands it out first nor closes it.
        expect(db.pool.idleCount).toBe(0);
        await holder.query(`SELECT pg_advisory_unlock(${lockKey})`);
        expect(await blocked).toEqual({ one: 1 });
      } finally {
        await holder.end();
      }
      expect(db.pool.idleCount).toBe(1);
    });

    it('refuses to report a commit that Postgres turned into a rollback', async () => {
      const db = await open();
      const insert = 'INSERT INTO t (id, v) VALUES (?, ?)';
      await db.run(insert, [1, 'kept']);
      // The work handles a statement's error and returns normally: Postgres has aborted the transaction, and
      // answers its COMMIT with ROLLBACK. The caller must hear that nothing was stored.
      await expect(
        db.transaction(async (tx) => {
          await tx.run(insert, [2, 'lost']);
          await tx.run(insert, [1, 'duplicate']).catch(() => {});
          return 'done';
        }),
      ).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', retryable: true });
      expect(await db.all('SELECT id FROM t ORDER BY id')).toEqual([{ id: 1 }]);
      // The connection is usable afterwards.
      await db.transaction((tx) => tx.run(insert, [3, 'next']));
      expect(await db.all('SELECT id FROM t ORDER BY id')).toEqual([{ id: 1 }, { id: 3 }]);
    });
  },
);
