import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createSqliteDatabase, type SqliteDatabase } from '../../src/store/index.js';

/** Which files the store opened beside the driver, and how often it synced them. */
const seen = vi.hoisted(() => ({ opened: [] as string[], syncs: 0 }));
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>();
  return {
    ...actual,
    open: async (...args: Parameters<typeof actual.open>) => {
      seen.opened.push(String(args[0]));
      const handle = await actual.open(...args);
      const datasync = handle.datasync.bind(handle);
      handle.datasync = async () => {
        seen.syncs++;
        await datasync();
      };
      return handle;
    },
  };
});

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('SQLite background WAL sync', () => {
  let dir: string;
  let db: SqliteDatabase | undefined;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'agentd-wal-sync-'));
    seen.opened.length = 0;
    seen.syncs = 0;
  });
  afterEach(async () => {
    await db?.close();
    db = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  it('syncs the WAL after commits, once per interval at most, and not while nothing is written', async () => {
    db = createSqliteDatabase({ path: join(dir, 'test.db'), walSyncIntervalMs: 20 });
    await db.run('CREATE TABLE t (v TEXT)');
    await expect.poll(() => seen.syncs).toBe(1);
    expect(seen.opened).toEqual([join(dir, 'test.db-wal')]);
    // A burst of commits within one interval is one sync.
    for (let index = 0; index < 20; index++)
      await db.transaction((tx) => tx.run('INSERT INTO t VALUES (?)', [`row ${index}`]));
    await expect.poll(() => seen.syncs).toBeGreaterThanOrEqual(2);
    // On a loaded machine the burst may span two intervals: let a sync still due land before counting.
    await wait(60);
    const afterBurst = seen.syncs;
    expect(afterBurst).toBeLessThanOrEqual(3);
    await wait(100);
    expect(seen.syncs).toBe(afterBurst);
    // Reads write nothing; a write outside a transaction (autocommitted, RETURNING too) is synced.
    await db.all('SELECT * FROM t');
    await wait(60);
    expect(seen.syncs).toBe(afterBurst);
    await db.all('INSERT INTO t VALUES (?) RETURNING v', ['returned']);
    await expect.poll(() => seen.syncs).toBe(afterBurst + 1);
    // The file is opened once and kept.
    expect(seen.opened).toHaveLength(1);
  });

  it('closes with a sync pending, and leaves nothing running', async () => {
    db = createSqliteDatabase({ path: join(dir, 'test.db'), walSyncIntervalMs: 20 });
    await db.run('CREATE TABLE t (v TEXT)');
    await db.close();
    db = undefined;
    await wait(60);
    expect(seen.syncs).toBe(0);
  });

  it('is off at 0 and for a RAM-only database', async () => {
    db = createSqliteDatabase({ path: join(dir, 'off.db'), walSyncIntervalMs: 0 });
    await db.run('CREATE TABLE t (v TEXT)');
    await db.close();
    db = createSqliteDatabase({ path: ':memory:', walSyncIntervalMs: 5 });
    await db.run('CREATE TABLE t (v TEXT)');
    await wait(40);
    expect(seen).toEqual({ opened: [], syncs: 0 });
  });
});
