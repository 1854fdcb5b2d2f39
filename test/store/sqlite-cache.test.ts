import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createSqliteDatabase,
  type SqliteDatabase,
  type SqliteDatabaseOptions,
} from '../../src/store/index.js';

/** The page cache's size as SQLite reports it: negative numbers are KiB. */
const cacheKib = (db: SqliteDatabase) => -(db.driver.pragma('cache_size', { simple: true }) as number);

describe('the SQLite page cache fitted to the file', () => {
  const dirs: string[] = [];
  const opened: SqliteDatabase[] = [];
  afterEach(async () => {
    for (const db of opened.splice(0)) await db.close();
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  const openIn = (dir: string, options: Partial<SqliteDatabaseOptions> = {}) => {
    const db = createSqliteDatabase({ path: join(dir, 'test.db'), ...options });
    opened.push(db);
    return db;
  };
  const freshDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentd-cache-'));
    dirs.push(dir);
    return dir;
  };
  /** About `mib` MiB of rows in one autocommitted statement (64 KiB blobs of zeros, on overflow pages). */
  const grow = (db: SqliteDatabase, mib: number) =>
    db.run(
      'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) ' +
        'INSERT INTO blobs (b) SELECT zeroblob(65536) FROM n',
      [mib * 16],
    );
  const fileKib = (db: SqliteDatabase) =>
    ((db.driver.pragma('page_count', { simple: true }) as number) *
      (db.driver.pragma('page_size', { simple: true }) as number)) /
    1024;
  /** The driver's own cache (better-sqlite3 builds SQLite with 16,000 KiB), read from a connection left as it is. */
  const ownCacheKib = () => {
    const plain = createSqliteDatabase({ path: ':memory:' });
    try {
      return cacheKib(plain);
    } finally {
      plain.driver.close();
    }
  };

  it("keeps the driver's own cache for a file under sixteen times it", async () => {
    const db = openIn(freshDir());
    await db.run('CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB NOT NULL)');
    await grow(db, 8);
    expect(ownCacheKib()).toBeGreaterThan(0);
    expect(cacheKib(db)).toBe(ownCacheKib());
  });

  it('gives a larger file a sixteenth of its size, as commits grow it and at open, up to maxCacheBytes', async () => {
    const dir = freshDir();
    const db = openIn(dir, { cacheFitEveryCommits: 2 });
    await db.run('CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB NOT NULL)');
    const sixteenTimesOwnMib = Math.ceil((16 * ownCacheKib()) / 1024);
    await grow(db, sixteenTimesOwnMib + 24);
    // The second commit since the last fit refits.
    await db.transaction((tx) => tx.run("INSERT INTO blobs (b) VALUES (x'00')"));
    const grown = fileKib(db);
    expect(grown / 16).toBeGreaterThan(ownCacheKib() + 1_000);
    expect(cacheKib(db)).toBe(Math.floor(grown / 16));

    // Another connection to the same file fits its cache when it opens, within its own limit.
    const capped = openIn(dir, { maxCacheBytes: (ownCacheKib() + 500) * 1024 });
    expect(cacheKib(capped)).toBe(ownCacheKib() + 500);
  });
});
