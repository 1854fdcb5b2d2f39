import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createSqliteDatabase, type SqliteDatabase } from '../../src/store/index.js';

describe('SQLite WAL checkpoints', () => {
  const opened: Array<{ db: SqliteDatabase; dir: string }> = [];
  afterEach(async () => {
    for (const { db, dir } of opened.splice(0)) {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  /** Commits `count` transactions of a row each (a few WAL pages each); returns the frames left in the WAL. */
  const framesAfterCommits = async (count: number, walAutocheckpointPages?: number) => {
    const dir = mkdtempSync(join(tmpdir(), 'agentd-checkpoint-'));
    const db = createSqliteDatabase({
      path: join(dir, 'test.db'),
      ...(walAutocheckpointPages === undefined ? {} : { walAutocheckpointPages }),
    });
    opened.push({ db, dir });
    await db.run('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE)');
    for (let index = 0; index < count; index++)
      await db.transaction((tx) =>
        tx.run('INSERT INTO t (v) VALUES (?)', [`value ${index} ${'x'.repeat(500)}`]),
      );
    const [state] = db.driver.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number }>;
    return { frames: state!.log, pages: db.driver.pragma('wal_autocheckpoint', { simple: true }) };
  };

  it('leaves thousands of pages in the WAL before a commit checkpoints them', async () => {
    const byDefault = await framesAfterCommits(300);
    expect(byDefault.pages).toBe(8_000);
    // Nothing was checkpointed on the way: every commit's frames are still there.
    expect(byDefault.frames).toBeGreaterThanOrEqual(600);

    const small = await framesAfterCommits(300, 50);
    expect(small.pages).toBe(50);
    expect(small.frames).toBeLessThan(100);
  });

  it('keeps every committed row through checkpoints', async () => {
    await framesAfterCommits(300, 50);
    const reader = createSqliteDatabase({ path: join(opened[0]!.dir, 'test.db') });
    try {
      expect(reader.driver.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 300 });
    } finally {
      reader.driver.close();
    }
  });
});
