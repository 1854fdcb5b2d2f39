import { describe, expect, it } from 'vitest';
import {
  rewritePlaceholders,
  sqlPlaceholders,
  sqlValueRows,
  withLimitsReadAtRun,
} from '../../src/store/placeholders.js';
import { describeEachDatabase } from '../helpers/databases.js';

describeEachDatabase('SqlDatabase', (getDb) => {
  it('runs statements with ? placeholders and returns numbers for BIGINT columns and counts', async () => {
    const db = getDb();
    await db.run('CREATE TABLE items (id TEXT PRIMARY KEY, size BIGINT NOT NULL, flag INTEGER NOT NULL)');
    const inserted = await db.run('INSERT INTO items (id, size, flag) VALUES (?, ?, ?), (?, ?, ?)', [
      'a',
      1_700_000_000_000,
      true,
      'b',
      2,
      false,
    ]);
    expect(inserted.changes).toBe(2);
    const rows = await db.all<{ id: string; size: number; flag: number }>(
      'SELECT id, size, flag FROM items ORDER BY id',
    );
    expect(rows).toEqual([
      { id: 'a', size: 1_700_000_000_000, flag: 1 },
      { id: 'b', size: 2, flag: 0 },
    ]);
    const count = await db.get<{ n: number; total: number }>(
      'SELECT COUNT(*) AS n, SUM(size) AS total FROM items',
    );
    expect(count).toEqual({ n: 2, total: 1_700_000_000_002 });
    expect(await db.get('SELECT id FROM items WHERE id = ?', ['missing'])).toBeUndefined();
    const returned = await db.get<{ id: string }>(
      'UPDATE items SET size = size + 1 WHERE id = ? RETURNING id',
      ['b'],
    );
    expect(returned).toEqual({ id: 'b' });
  });

  it('runs each close hook once as it closes, while its statements still run, and one added later at once', async () => {
    const db = getDb();
    await db.run('CREATE TABLE t (v TEXT)');
    await db.run("INSERT INTO t (v) VALUES ('a')");
    const seen: string[] = [];
    db.onClose(async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      seen.push(`rows ${(await db.all('SELECT v FROM t')).length}`);
    });
    // A failing hook neither keeps the connection open nor hides the others.
    db.onClose(() => {
      throw new Error('a failing hook');
    });
    await db.close();
    expect(seen).toEqual(['rows 1']);
    await db.close();
    expect(seen).toEqual(['rows 1']);
    let late = 0;
    db.onClose(() => {
      late++;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(late).toBe(1);
  });

  it('resolves a close called while another runs only once the connection is gone', async () => {
    const db = getDb();
    let releaseHook!: () => void;
    const hookHeld = new Promise<void>((resolve) => {
      releaseHook = resolve;
    });
    db.onClose(() => hookHeld);
    const closed: string[] = [];
    const first = db.close().then(() => closed.push('first'));
    const second = db.close().then(() => closed.push('second'));
    // Long enough for a second close that did not wait to have ended (on Postgres, the test's dropped schema).
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(closed).toEqual([]);
    releaseHook();
    await second;
    // Gone by the time the second caller hears of it: no statement runs any more.
    await expect(db.get('SELECT 1 AS one')).rejects.toThrow();
    await first;
    expect(closed.sort()).toEqual(['first', 'second']);
  });

  it('returns no rows from all/get on statements that produce none', async () => {
    const db = getDb();
    await db.run('CREATE TABLE t (v TEXT)');
    expect(await db.all('INSERT INTO t (v) VALUES (?)', ['a'])).toEqual([]);
    expect(await db.get('INSERT INTO t (v) VALUES (?)', ['b'])).toBeUndefined();
    expect((await db.run('SELECT v FROM t')).changes).toBe(0);
    expect(await db.all('SELECT v FROM t ORDER BY v')).toEqual([{ v: 'a' }, { v: 'b' }]);
  });

  it('names the rows an INSERT made on SQLite by the last rowid, consecutive in VALUES order', async () => {
    const db = getDb();
    if (db.dialect !== 'sqlite') return;
    await db.run('CREATE TABLE r (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT NOT NULL)');
    await db.run("INSERT INTO r (v) VALUES ('x'), ('y')");
    await db.run('DELETE FROM r');
    const inserted = await db.transaction((tx) =>
      tx.run('INSERT INTO r (v) VALUES (?), (?), (?)', ['a', 'b', 'c']),
    );
    expect(inserted.changes).toBe(3);
    const rows = await db.all<{ id: number; v: string }>('SELECT id, v FROM r ORDER BY id');
    expect(rows.map((row) => row.v)).toEqual(['a', 'b', 'c']);
    // AUTOINCREMENT does not hand out the deleted rows' ids again.
    expect(rows.map((row) => row.id)).toEqual([3, 4, 5]);
    expect(inserted.lastInsertRowid).toBe(5);
  });

  it('accepts a parameterless multi-statement script through run', async () => {
    const db = getDb();
    await db.run(
      "CREATE TABLE a (x INTEGER); CREATE TABLE b (y TEXT); INSERT INTO a (x) VALUES (1); INSERT INTO b (y) VALUES ('?')",
    );
    expect(await db.get('SELECT x FROM a')).toEqual({ x: 1 });
    expect(await db.get('SELECT y FROM b WHERE y = ?', ['?'])).toEqual({ y: '?' });
  });

  it.each([
    ['ambient (the default)', undefined],
    ['not ambient, through its executor alone', { ambient: false }],
  ] as const)('commits a transaction and rolls it back when the work throws: %s', async (_, options) => {
    const db = getDb();
    await db.run('CREATE TABLE t (v TEXT)');
    await db.transaction(async (tx) => {
      await tx.run('INSERT INTO t (v) VALUES (?)', ['kept']);
    }, options);
    await expect(
      db.transaction(async (tx) => {
        await tx.run('INSERT INTO t (v) VALUES (?)', ['lost']);
        throw new Error('boom');
      }, options),
    ).rejects.toThrow('boom');
    expect(await db.all('SELECT v FROM t')).toEqual([{ v: 'kept' }]);
  });

  // A nested transaction that is not ambient still nests, as a savepoint, in the ambient one around it.
  it.each([
    ['ambient', undefined],
    ['not ambient', { ambient: false }],
  ] as const)('rolls back a failing nested transaction only: %s', async (_, options) => {
    const db = getDb();
    await db.run('CREATE TABLE t (v TEXT)');
    await db.transaction(async (tx) => {
      await tx.run('INSERT INTO t (v) VALUES (?)', ['outer']);
      await expect(
        db.transaction(async (inner) => {
          await inner.run('INSERT INTO t (v) VALUES (?)', ['inner']);
          throw new Error('inner failure');
        }, options),
      ).rejects.toThrow('inner failure');
      await db.transaction(async (inner) => {
        await inner.run('INSERT INTO t (v) VALUES (?)', ['inner-kept']);
      }, options);
      // A statement on the database object inside the transaction joins it rather than deadlocking.
      expect(await db.all('SELECT v FROM t ORDER BY v')).toEqual([{ v: 'inner-kept' }, { v: 'outer' }]);
    });
    expect(await db.all('SELECT v FROM t ORDER BY v')).toEqual([{ v: 'inner-kept' }, { v: 'outer' }]);
  });

  it('rejects use of a transaction executor after the transaction ended', async () => {
    const db = getDb();
    let leaked: Parameters<Parameters<typeof db.transaction>[0]>[0] | undefined;
    await db.transaction(async (tx) => {
      leaked = tx;
    });
    await expect(leaked!.get('SELECT 1 AS one')).rejects.toThrow(/after its transaction ended/);
  });

  it('applies the LIMIT bound on each run of the same statement', async () => {
    const db = getDb();
    await db.run('CREATE TABLE numbers (n INTEGER NOT NULL)');
    await db.run('INSERT INTO numbers (n) VALUES (1), (2), (3), (4), (5)');
    const firstOf = async (limit: number) =>
      (await db.all<{ n: number }>('SELECT n FROM numbers ORDER BY n LIMIT ?', [limit])).map((row) => row.n);
    expect(await firstOf(3)).toEqual([1, 2, 3]);
    expect(await firstOf(1)).toEqual([1]);
    expect(await firstOf(0)).toEqual([]);
    expect(await firstOf(4)).toEqual([1, 2, 3, 4]);
    const page = await db.all<{ n: number }>('SELECT n FROM numbers ORDER BY n LIMIT ? OFFSET ?', [2, 3]);
    expect(page.map((row) => row.n)).toEqual([4, 5]);
    const counted = await db.get<{ c: number }>(
      'SELECT count(*) AS c FROM (SELECT n FROM numbers WHERE n > ? LIMIT ?) m',
      [1, 2],
    );
    expect(Number(counted?.c)).toBe(2);
  });

  it('keeps statements from outside a transaction out of it until it ends', async () => {
    const db = getDb();
    await db.run('CREATE TABLE t (v TEXT)');
    let releaseWork!: () => void;
    const workMayFinish = new Promise<void>((resolve) => {
      releaseWork = resolve;
    });
    let insideStarted!: () => void;
    const started = new Promise<void>((resolve) => {
      insideStarted = resolve;
    });
    const transaction = db.transaction(async (tx) => {
      await tx.run('INSERT INTO t (v) VALUES (?)', ['in-tx']);
      insideStarted();
      await workMayFinish;
      throw new Error('roll back');
    });
    await started;
    const outsideWrite = db.run('INSERT INTO t (v) VALUES (?)', ['outside']);
    releaseWork();
    await expect(transaction).rejects.toThrow('roll back');
    await outsideWrite;
    // The outside write survived the rollback, so it was not part of the transaction.
    expect(await db.all('SELECT v FROM t')).toEqual([{ v: 'outside' }]);
  });

  it('leaves a statement on the database issued inside a transaction that is not ambient out of it', async () => {
    const db = getDb();
    await db.run('CREATE TABLE t (v TEXT)');
    let direct: Promise<unknown> | undefined;
    await expect(
      db.transaction(
        async (tx) => {
          await tx.run('INSERT INTO t (v) VALUES (?)', ['rolled-back']);
          // Not awaited: on SQLite it waits for the transaction to end, on Postgres it takes another connection.
          direct = db.run('INSERT INTO t (v) VALUES (?)', ['direct']);
          throw new Error('roll back');
        },
        { ambient: false },
      ),
    ).rejects.toThrow('roll back');
    await direct;
    // The direct statement did not join the transaction: the rollback left it alone.
    expect(await db.all('SELECT v FROM t')).toEqual([{ v: 'direct' }]);
  });
});

describe('sqlPlaceholders and sqlValueRows', () => {
  it('write as many placeholders as asked, one row or several', () => {
    expect(sqlPlaceholders(3)).toBe('?, ?, ?');
    expect(sqlPlaceholders(0)).toBe('');
    expect(sqlValueRows(2, 3)).toBe('(?, ?, ?), (?, ?, ?)');
  });
});

describe('rewritePlaceholders', () => {
  it('numbers placeholders and leaves quoted text and comments alone', () => {
    expect(rewritePlaceholders('SELECT ? , ?')).toBe('SELECT $1 , $2');
    expect(
      rewritePlaceholders('SELECT \'?\', "a?", ? -- what?\n, ? /* ? */ , $$ ? $$, $tag$ ? $tag$, ?'),
    ).toBe('SELECT \'?\', "a?", $1 -- what?\n, $2 /* ? */ , $$ ? $$, $tag$ ? $tag$, $3');
    expect(rewritePlaceholders("SELECT 'it''s ?', ?")).toBe("SELECT 'it''s ?', $1");
    expect(rewritePlaceholders('SELECT 1')).toBe('SELECT 1');
  });
});

describe('withLimitsReadAtRun', () => {
  it('casts the placeholder right after each LIMIT and leaves every other one alone', () => {
    expect(withLimitsReadAtRun('SELECT a FROM t WHERE b = ? LIMIT ?')).toBe(
      'SELECT a FROM t WHERE b = ? LIMIT CAST(? AS INTEGER)',
    );
    expect(
      withLimitsReadAtRun(
        'SELECT count(*) FROM (SELECT 1 FROM f WHERE f MATCH ? limit\n  ?) m LIMIT ? OFFSET ?',
      ),
    ).toBe(
      'SELECT count(*) FROM (SELECT 1 FROM f WHERE f MATCH ? limit\n  CAST(? AS INTEGER)) m LIMIT CAST(? AS INTEGER) OFFSET ?',
    );
    expect(withLimitsReadAtRun('SELECT \'LIMIT ?\', "LIMIT ?" -- LIMIT ?\n/* LIMIT ? */ FROM t')).toBe(
      'SELECT \'LIMIT ?\', "LIMIT ?" -- LIMIT ?\n/* LIMIT ? */ FROM t',
    );
    expect(withLimitsReadAtRun('SELECT a FROM t WHERE row_limit ? OR nolimit = ?')).toBe(
      'SELECT a FROM t WHERE row_limit ? OR nolimit = ?',
    );
    expect(withLimitsReadAtRun('SELECT a FROM t LIMIT 5')).toBe('SELECT a FROM t LIMIT 5');
  });
});
