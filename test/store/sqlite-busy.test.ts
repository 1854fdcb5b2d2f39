import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSqliteDatabase, type SqliteDatabase } from '../../src/store/index.js';
import { temporarySqliteFile } from '../helpers/databases.js';

/**
 * Two connections to one file in one process (a CLI command and the runtime in a test, two stores opened
 * through the library): SQLite's busy handler would sleep on the thread that the lock holder needs.
 */
describe('SQLite waits for a busy lock on a timer', () => {
  let file: ReturnType<typeof temporarySqliteFile>;
  let first: SqliteDatabase;
  let second: SqliteDatabase;

  beforeEach(async () => {
    file = temporarySqliteFile('agentd-busy-');
    first = createSqliteDatabase({ path: file.path });
    await first.run('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)');
    second = createSqliteDatabase({ path: file.path, busyTimeoutMs: 2_000 });
  });
  afterEach(async () => {
    await first.close();
    await second.close();
    file.remove();
  });

  const values = async () =>
    (await first.all<{ v: string }>('SELECT v FROM t ORDER BY id')).map((row) => row.v);

  it('lets a transaction begun while another connection of the process holds its group commit open', async () => {
    let inner: Promise<string> | undefined;
    const outer = first.transaction(async (tx) => {
      await tx.run("INSERT INTO t (v) VALUES ('first')");
      // Begins while `first` holds the write lock, which it keeps until its commit at the end of this turn.
      inner = second.transaction(async (tx2) => {
        await tx2.run("INSERT INTO t (v) VALUES ('second')");
        return 'second committed';
      });
      return 'first committed';
    });
    expect(await outer).toBe('first committed');
    expect(await inner).toBe('second committed');
    expect(await values()).toEqual(['first', 'second']);
  });

  it('runs a statement of its own again once the lock holder lets go', async () => {
    first.driver.exec('BEGIN IMMEDIATE');
    first.driver.exec("INSERT INTO t (v) VALUES ('held')");
    const write = second.run("INSERT INTO t (v) VALUES ('waited')");
    setTimeout(() => first.driver.exec('COMMIT'), 30);
    await expect(write).resolves.toMatchObject({ changes: 1 });
    expect(await values()).toEqual(['held', 'waited']);
  });

  it('gives up after its busy timeout with STORE_UNAVAILABLE, while timers keep running', async () => {
    const impatient = createSqliteDatabase({ path: file.path, busyTimeoutMs: 150 });
    first.driver.exec('BEGIN IMMEDIATE');
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 10);
    try {
      await expect(
        impatient.transaction((tx) => tx.run("INSERT INTO t (v) VALUES ('never')")),
      ).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', details: { driverCode: 'SQLITE_BUSY' } });
      await expect(impatient.run("INSERT INTO t (v) VALUES ('never')")).rejects.toMatchObject({
        code: 'STORE_UNAVAILABLE',
      });
      // The waits were on timers: the event loop ran the ticker meanwhile (a thread asleep in SQLite's
      // busy handler would have run it not once).
      expect(ticks).toBeGreaterThanOrEqual(5);
    } finally {
      clearInterval(ticker);
      first.driver.exec('ROLLBACK');
      await impatient.close();
    }
    expect(await values()).toEqual([]);
  });
});
