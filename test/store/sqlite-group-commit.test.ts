import { readdirSync, readlinkSync } from 'node:fs';
import type { Statement } from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createSqliteDatabase, type SqliteDatabase } from '../../src/store/index.js';
import { temporarySqliteFile } from '../helpers/databases.js';

/** COMMITs run on each connection since `commitsOf` was first called for it. */
const commitCounts = new WeakMap<object, number>();

/** Counts the COMMITs `database` runs from here on: runs of its prepared COMMIT statement. */
function commitsOf(database: SqliteDatabase): () => number {
  const statements = Object.getPrototypeOf(database.driver.prepare('SELECT 1')) as Statement;
  if (!vi.isMockFunction(statements.run)) {
    const run = statements.run;
    vi.spyOn(statements, 'run').mockImplementation(function (this: Statement, ...params: unknown[]) {
      if (this.source === 'COMMIT')
        commitCounts.set(this.database, (commitCounts.get(this.database) ?? 0) + 1);
      return run.apply(this, params);
    });
  }
  commitCounts.set(database.driver, 0);
  return () => commitCounts.get(database.driver) ?? 0;
}

describe('SQLite group commit', () => {
  let file: ReturnType<typeof temporarySqliteFile>;
  let db: SqliteDatabase;
  let commits: () => number;

  beforeEach(async () => {
    file = temporarySqliteFile('agentd-group-commit-');
    db = createSqliteDatabase({ path: file.path });
    await db.run('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE)');
    commits = commitsOf(db);
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await db.close();
    file.remove();
  });

  /** What another connection sees: only committed rows. */
  const committedRows = () => {
    const reader = createSqliteDatabase({ path: file.path });
    try {
      return (reader.driver.prepare('SELECT v FROM t ORDER BY id').all() as Array<{ v: string }>).map(
        (row) => row.v,
      );
    } finally {
      reader.driver.close();
    }
  };

  it('commits transactions that queued behind each other once, and settles each only after it', async () => {
    const settledBeforeCommit: string[] = [];
    const write = (v: string) =>
      db
        .transaction(async (tx) => {
          await tx.run('INSERT INTO t (v) VALUES (?)', [v]);
          return v;
        })
        .then((value) => {
          if (!committedRows().includes(v)) settledBeforeCommit.push(v);
          return value;
        });
    expect(await Promise.all(['a', 'b', 'c', 'd'].map(write))).toEqual(['a', 'b', 'c', 'd']);
    expect(commits()).toBe(1);
    expect(settledBeforeCommit).toEqual([]);
    expect(committedRows()).toEqual(['a', 'b', 'c', 'd']);
  });

  it('commits the first transaction of an event-loop turn at once, before the turn ends', async () => {
    // A lone writer (one chat client) must not wait through the rest of the turn for a commit nobody joins.
    let turnEnded = false;
    setImmediate(() => {
      turnEnded = true;
    });
    await db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', ['a']));
    expect(turnEnded).toBe(false);
    expect(committedRows()).toEqual(['a']);
    expect(commits()).toBe(1);
  });

  it('lets transactions started by later callbacks of the same event-loop turn join one commit', async () => {
    // Each socket read is its own callback. The first chat turn of the I/O phase commits at once; the turns
    // the next reads start share one commit instead of paying one each.
    const insert = (v: string) => db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', [v]));
    const inLaterCallback = (v: string) =>
      new Promise<unknown>((resolve) => setImmediate(() => resolve(insert(v))));
    const later = [inLaterCallback('b'), inLaterCallback('c'), inLaterCallback('d')];
    await insert('a');
    expect(commits()).toBe(1);
    await Promise.all(later);
    expect(commits()).toBe(2);
    expect(committedRows()).toEqual(['a', 'b', 'c', 'd']);
  });

  it('commits at once again once the event-loop turn of an earlier commit has ended', async () => {
    const insert = (v: string) => db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', [v]));
    await insert('a');
    await new Promise((resolve) => setImmediate(resolve));
    let turnEnded = false;
    setImmediate(() => {
      turnEnded = true;
    });
    await insert('b');
    expect(turnEnded).toBe(false);
    expect(committedRows()).toEqual(['a', 'b']);
  });

  it('commits at once in a RAM-only database, whose COMMIT writes nothing to share', async () => {
    const ram = createSqliteDatabase({ path: ':memory:' });
    try {
      await ram.run('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)');
      const ramCommits = commitsOf(ram);
      const insert = (v: string) => ram.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', [v]));
      const later = new Promise<unknown>((resolve) => setImmediate(() => resolve(insert('b'))));
      await Promise.all([insert('a'), later]);
      expect(ramCommits()).toBe(2);
    } finally {
      await ram.close();
    }
  });

  it('commits a transaction awaited on its own before the next one starts', async () => {
    await db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', ['a']));
    expect(committedRows()).toEqual(['a']);
    await db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', ['b']));
    expect(commits()).toBe(2);
  });

  it("commits under a test's fake timers too", async () => {
    vi.useFakeTimers();
    try {
      await db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', ['a']));
      expect(committedRows()).toEqual(['a']);
    } finally {
      vi.useRealTimers();
    }
  });

  it('rolls back only the failed member of a group', async () => {
    const results = await Promise.allSettled([
      db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', ['a'])),
      db.transaction(async (tx) => {
        await tx.run('INSERT INTO t (v) VALUES (?)', ['b']);
        await tx.run('INSERT INTO t (v) VALUES (?)', ['a']);
      }),
      db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', ['c'])),
    ]);
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(committedRows()).toEqual(['a', 'c']);
  });

  it('fails the whole group with the cause when SQLite itself ended the transaction', async () => {
    // Disk full or an I/O error makes SQLite roll the whole transaction back, the group's earlier members
    // with it: every member must fail with that cause (retryable STORE_UNAVAILABLE), none resolve.
    const diskFull = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    const results = await Promise.allSettled([
      db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', ['a'])),
      db.transaction(async (tx) => {
        await tx.run('INSERT INTO t (v) VALUES (?)', ['b']);
        db.driver.exec('ROLLBACK');
        throw diskFull;
      }),
    ]);
    for (const result of results) {
      expect(result.status).toBe('rejected');
      expect((result as PromiseRejectedResult).reason).toMatchObject({ code: 'STORE_UNAVAILABLE' });
    }
    expect(committedRows()).toEqual([]);
    await db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', ['c']));
    expect(committedRows()).toEqual(['c']);
  });

  it('commits an open group before a statement of its own runs', async () => {
    const grouped = Promise.all([
      db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', ['a'])),
      db.run('INSERT INTO t (v) VALUES (?)', ['plain']),
      db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', ['b'])),
    ]);
    await grouped;
    expect(committedRows()).toEqual(['a', 'plain', 'b']);
    expect(commits()).toBe(2);
  });

  it('commits each on its own with maxGroupCommit 1', async () => {
    await db.close();
    db = createSqliteDatabase({ path: file.path, maxGroupCommit: 1 });
    commits = commitsOf(db);
    await Promise.all(
      ['a', 'b', 'c'].map((v) => db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', [v]))),
    );
    expect(commits()).toBe(3);
  });

  it.runIf(process.platform === 'linux')(
    'keeps the savepoints of a group in memory: no temporary file, however many pages they change',
    async () => {
      // SQLite's temporary files are unlinked as soon as they are opened: an open descriptor is what is left.
      const deletedFilesOpen = () =>
        readdirSync('/proc/self/fd').filter((fd) => {
          try {
            return readlinkSync(`/proc/self/fd/${fd}`).endsWith('(deleted)');
          } catch {
            return false;
          }
        }).length;
      await db.transaction(async (tx) => {
        for (let index = 0; index < 400; index++)
          await tx.run('INSERT INTO t (v) VALUES (?)', [`${index} ${'x'.repeat(1_000)}`]);
      });
      const before = deletedFilesOpen();
      let during = 0;
      // Two transactions queued together: the second joins the first's commit under a SAVEPOINT, and its
      // update changes every page of the table (about 100, well past SQLite's 64 KiB before it spills).
      await Promise.all([
        db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', ['first'])),
        db.transaction(async (tx) => {
          await tx.run("UPDATE t SET v = v || '!'");
          during = deletedFilesOpen();
        }),
      ]);
      expect(commits()).toBe(2);
      expect(during).toBe(before);
      expect(committedRows().filter((v) => v.endsWith('!'))).toHaveLength(401);
    },
  );
});
