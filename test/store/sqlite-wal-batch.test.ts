// The SQLite this repository's install builds (scripts/build-sqlite.mjs, native/sqlite-wal-batch.c) hands a
// commit's WAL frames to the file in one write. What it must not change: every acknowledged commit is in the
// file, readable by other connections at once and after a kill; a commit that does not fit on the disk fails
// with SQLITE_FULL and takes nothing before it with it; a transaction too big for one write, with pages spilled
// and rewritten before its commit, still reads back whole. On Linux it also starts writing out the pages a
// checkpoint copies into the database file as it copies them, which must change nothing but the wait.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createSqliteDatabase } from '../../src/store/index.js';

const driverPath = createRequire(import.meta.url).resolve('better-sqlite3');

interface BatchReport {
  active: boolean;
  writesAsked: number;
  writesMade: number;
  commitsBatched: number;
  writeOutsStarted: number;
}

const reportOf = (db: Database.Database): BatchReport =>
  JSON.parse(db.prepare('SELECT agentd_wal_batch()').pluck().get() as string) as BatchReport;

const open = (path: string): Database.Database => {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  return db;
};

const schema =
  'CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL);' +
  'CREATE INDEX IF NOT EXISTS notes_title ON notes (title); CREATE INDEX IF NOT EXISTS notes_body ON notes (body);';

/** `source` (CommonJS, with `Database` in scope) as a script file of its own. */
function scriptOf(source: string): string {
  const script = join(mkdtempSync(join(tmpdir(), 'agentd-wal-batch-script-')), 'script.cjs');
  writeFileSync(script, `const Database = require(${JSON.stringify(driverPath)});\n${source}`);
  return script;
}

/** Runs `source` in a node process of its own. */
const runNode = (source: string, env: Record<string, string> = {}) =>
  spawnSync(process.execPath, [scriptOf(source)], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 60_000,
  });

const freshDir = () => mkdtempSync(join(tmpdir(), 'agentd-wal-batch-'));

/** The notes of the file at `path`, by id, once its integrity check has passed. */
function notesAfterIntegrityCheck(path: string): Array<{ id: number; body: string }> {
  const db = open(path);
  try {
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    return db.prepare('SELECT id, body FROM notes ORDER BY id').all() as Array<{ id: number; body: string }>;
  } finally {
    db.close();
  }
}

/** A child script's opening: `db` on `path`, in WAL with no automatic checkpoint, with the notes table. */
const openWithoutCheckpoints = (path: string) => `const db = new Database(${JSON.stringify(path)});
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('wal_autocheckpoint = 0');
  db.exec(${JSON.stringify(schema)});`;

describe('SQLite with WAL batching (the build `npm ci` makes)', () => {
  it('writes each commit to the WAL once, and another connection reads it at once', () => {
    const path = join(freshDir(), 'notes.db');
    const writer = open(path);
    writer.exec(schema);
    const reader = open(path);
    const insert = writer.prepare('INSERT INTO notes (title, body) VALUES (?, ?)');
    const count = reader.prepare('SELECT count(*) FROM notes').pluck();
    const before = reportOf(writer);
    expect(before.active).toBe(true);

    for (let commit = 1; commit <= 50; commit++) {
      writer.transaction(() => {
        insert.run(`title ${commit} ${'t'.repeat(1500)}`, `body ${commit} ${'b'.repeat(1500)}`);
        insert.run(`short ${commit}`, `also ${commit}`);
      })();
      expect(count.get()).toBe(commit * 2);
    }

    const after = reportOf(writer);
    // Each commit's frames (a header and a page each, several pages) in one write of its own.
    expect(after.writesMade - before.writesMade).toBe(50);
    expect(after.commitsBatched - before.commitsBatched).toBe(50);
    expect(after.writesAsked - before.writesAsked).toBeGreaterThanOrEqual(50 * 2 * 3);
    reader.close();
    writer.close();

    const again = open(path);
    expect(again.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(again.prepare("SELECT body FROM notes WHERE title LIKE 'short 37'").pluck().get()).toBe('also 37');
    expect(again.prepare('SELECT count(*) FROM notes').pluck().get()).toBe(100);
    again.close();
  });

  it('reports itself to a store on a file, and AGENTD_SQLITE_WAL_BATCH=0 leaves SQLite writing as it did', () => {
    const db = createSqliteDatabase({ path: join(freshDir(), 'store.db') });
    expect(db.walBatching).toBe(true);
    db.driver.close();
    // In memory there is no log to write.
    const inMemory = createSqliteDatabase({ path: ':memory:' });
    expect(inMemory.walBatching).toBe(false);
    inMemory.driver.close();

    const path = join(freshDir(), 'off.db');
    const child = runNode(
      `const db = new Database(${JSON.stringify(path)});
       db.pragma('journal_mode = WAL');
       db.exec(${JSON.stringify(schema)});
       for (let i = 0; i < 10; i++) db.prepare('INSERT INTO notes (title, body) VALUES (?, ?)').run('t' + i, 'b'.repeat(3000));
       process.stdout.write(db.prepare('SELECT agentd_wal_batch()').pluck().get());`,
      { AGENTD_SQLITE_WAL_BATCH: '0' },
    );
    expect(child.status, child.stderr).toBe(0);
    expect(JSON.parse(child.stdout)).toEqual({
      active: false,
      writesAsked: 0,
      writesMade: 0,
      commitsBatched: 0,
      writeOutsStarted: 0,
    });
  });

  // A checkpoint copies the pages of 1,250 commits of a workflow run into the database file and syncs it:
  // the write-out of every megabyte copied starts at once, and what the sync is left to wait for is less.
  // AGENTD_SQLITE_WRITE_OUT=0 leaves the write-out to the sync, as before, and keeps the batching.
  const writeOutSettings: Array<{ setting: string; env: Record<string, string>; startsWriteOuts: boolean }> =
    [
      { setting: 'unset', env: {}, startsWriteOuts: true },
      { setting: '0', env: { AGENTD_SQLITE_WRITE_OUT: '0' }, startsWriteOuts: false },
    ];
  it.skipIf(process.platform !== 'linux').each(writeOutSettings)(
    "starts writing out a checkpoint's pages as it copies them (AGENTD_SQLITE_WRITE_OUT $setting), and loses nothing through a kill after it",
    ({ env, startsWriteOuts }) => {
      const path = join(freshDir(), 'checkpointed.db');
      const child = runNode(
        `const fs = require('node:fs');
         ${openWithoutCheckpoints(path)}
         const insert = db.prepare('INSERT INTO notes (id, title, body) VALUES (?, ?, ?)');
         const report = () => JSON.parse(db.prepare('SELECT agentd_wal_batch()').pluck().get());
         for (let id = 1; id <= 1000; id++) {
           insert.run(id, 'note ' + id, String(id).repeat(3000 / String(id).length));
           fs.writeSync(1, 'ack ' + id + '\\n');
         }
         const before = report();
         const [checkpoint] = db.pragma('wal_checkpoint(PASSIVE)');
         const after = report();
         fs.writeSync(1, 'checkpoint ' + JSON.stringify({ ...checkpoint, writeOuts: after.writeOutsStarted - before.writeOutsStarted, batching: after.active && after.commitsBatched >= 1000 }) + '\\n');
         // Commits after the checkpoint go to the log from its start again, over the frames it copied.
         for (let id = 1001; id <= 1100; id++) {
           insert.run(id, 'note ' + id, 'after the checkpoint ' + id);
           fs.writeSync(1, 'ack ' + id + '\\n');
         }
         process.kill(process.pid, 'SIGKILL');`,
        env,
      );
      expect(child.signal, child.stderr).toBe('SIGKILL');
      const lines = child.stdout.trim().split('\n');
      expect(lines.filter((line) => /^ack \d+$/.test(line))).toHaveLength(1100);
      const checkpoint = JSON.parse(lines.find((line) => line.startsWith('checkpoint '))!.slice(11)) as {
        busy: number;
        log: number;
        checkpointed: number;
        writeOuts: number;
        batching: boolean;
      };
      // Every frame copied, and the pages of 1,000 rows of about 3 KB each (over 4 MB): a write-out started
      // at each megabyte.
      expect(checkpoint.busy).toBe(0);
      expect(checkpoint.checkpointed).toBe(checkpoint.log);
      expect(checkpoint.batching).toBe(true);
      if (startsWriteOuts) expect(checkpoint.writeOuts).toBeGreaterThanOrEqual(3);
      else expect(checkpoint.writeOuts).toBe(0);

      const rows = notesAfterIntegrityCheck(path);
      expect(rows).toHaveLength(1100);
      for (const { id, body } of rows) {
        expect(body).toBe(
          id <= 1000 ? String(id).repeat(3000 / String(id).length) : `after the checkpoint ${id}`,
        );
      }
    },
  );

  // Two connections take turns at the small commits, so each meets a log the other moved on. The second
  // setting has the log start over every few pages (its header rewritten at offset 0, the file cut back)
  // and SQLite syncing each commit.
  it.each([
    { synchronous: 'NORMAL', autocheckpointPages: 0, journalSizeLimit: -1 },
    { synchronous: 'FULL', autocheckpointPages: 16, journalSizeLimit: 0 },
  ])(
    'keeps every acknowledged commit through a kill, a transaction bigger than one write and pages rewritten after spilling (synchronous $synchronous, checkpoint every $autocheckpointPages pages)',
    ({ synchronous, autocheckpointPages, journalSizeLimit }) => {
      const path = join(freshDir(), 'killed.db');
      // The child acknowledges each commit on stdout as it returns, then dies by SIGKILL: what the file
      // holds is what the database and its WAL hold.
      const child = runNode(
        `const fs = require('node:fs');
         const connect = () => {
           const db = new Database(${JSON.stringify(path)});
           db.pragma('journal_mode = WAL');
           db.pragma('synchronous = ${synchronous}');
           db.pragma('wal_autocheckpoint = ${autocheckpointPages}');
           db.pragma('journal_size_limit = ${journalSizeLimit}');
           return db;
         };
         const db = connect();
         db.exec(${JSON.stringify(schema)});
         const other = connect();
         const inserts = [db, other].map((connection) => connection.prepare('INSERT INTO notes (id, title, body) VALUES (?, ?, ?)'));
         for (let id = 1; id <= 120; id++) {
           inserts[id % 2].run(id, 'small ' + id, 'x'.repeat(id * 37));
           fs.writeSync(1, 'ack ' + id + '\\n');
         }
         // A 20-page cache makes the big transaction spill pages to the WAL before its commit, and the
         // updates rewrite some of them: SQLite writes those frames, and then every frame header from the
         // first of them, again at their old offsets.
         db.pragma('cache_size = 20');
         const before = JSON.parse(db.prepare('SELECT agentd_wal_batch()').pluck().get());
         db.transaction(() => {
           for (let id = 1001; id <= 4000; id++) inserts[0].run(id, 'big ' + id, String(id).repeat(300));
           db.prepare("UPDATE notes SET body = 'rewritten ' || id WHERE id BETWEEN 1001 AND 1100").run();
         })();
         const after = JSON.parse(db.prepare('SELECT agentd_wal_batch()').pluck().get());
         fs.writeSync(1, 'ack big ' + JSON.stringify({ asked: after.writesAsked - before.writesAsked, made: after.writesMade - before.writesMade }) + '\\n');
         process.kill(process.pid, 'SIGKILL');`,
      );
      expect(child.signal, child.stderr).toBe('SIGKILL');
      const acks = child.stdout.trim().split('\n');
      expect(acks.filter((line) => /^ack \d+$/.test(line))).toHaveLength(120);
      const big = JSON.parse(acks.at(-1)!.slice('ack big '.length)) as { asked: number; made: number };
      // Spilled frames are read back (which writes what is gathered first), a write takes at most 31 frames,
      // and frames written again go on their own: many writes, still fewer than SQLite asked for.
      expect(big.made).toBeGreaterThan(1);
      expect(big.made).toBeLessThan(big.asked);

      const rows = notesAfterIntegrityCheck(path);
      expect(rows).toHaveLength(120 + 3000);
      for (const { id, body } of rows) {
        if (id <= 120) expect(body).toBe('x'.repeat(id * 37));
        else if (id <= 1100) expect(body).toBe(`rewritten ${id}`);
        else expect(body).toBe(String(id).repeat(300));
      }
    },
  );

  const canMountTmpfs = (() => {
    const dir = mkdtempSync(join(tmpdir(), 'agentd-tmpfs-probe-'));
    return spawnSync('unshare', ['-rm', 'sh', '-c', `mount -t tmpfs -o size=1m tmpfs ${dir}`]).status === 0;
  })();

  it.skipIf(!canMountTmpfs)(
    'fails the commit that does not fit on a full disk with SQLITE_FULL, and loses none before it',
    () => {
      const disk = join(freshDir(), 'disk');
      mkdirSync(disk);
      const path = join(disk, 'full.db');
      // In a mount namespace of its own: a 2 MiB disk, a filler to free afterwards, commits until one fails,
      // then (the filler gone) the file opened again by a second process on the same disk.
      const fill = `const fs = require('node:fs');
        fs.writeFileSync(${JSON.stringify(join(disk, 'filler'))}, Buffer.alloc(256 * 1024, 1));
        ${openWithoutCheckpoints(path)}
        const insert = db.prepare('INSERT INTO notes (title, body) VALUES (?, ?)');
        let acknowledged = 0;
        try {
          for (;;) {
            db.transaction(() => { for (let i = 0; i < 4; i++) insert.run('t' + acknowledged + '.' + i, 'b'.repeat(2000)); })();
            acknowledged++;
          }
        } catch (error) {
          fs.writeSync(1, JSON.stringify({ acknowledged, code: error.code }));
        }`;
      const check = `const db = new Database(${JSON.stringify(path)});
        const integrity = db.pragma('integrity_check', { simple: true });
        const rows = db.prepare('SELECT count(*) FROM notes').pluck().get();
        db.prepare('INSERT INTO notes (title, body) VALUES (?, ?)').run('after', 'room again');
        process.stdout.write(JSON.stringify({ integrity, rows }));`;
      const out = freshDir();
      const node = JSON.stringify(process.execPath);
      const script = [
        `mount -t tmpfs -o size=2m tmpfs ${disk} || exit 90`,
        `${node} ${scriptOf(fill)} > ${join(out, 'fill.out')} || exit 91`,
        `rm ${join(disk, 'filler')}`,
        `${node} ${scriptOf(check)} > ${join(out, 'check.out')} || exit 92`,
        `cat ${join(out, 'fill.out')}; echo; cat ${join(out, 'check.out')}`,
      ].join('\n');
      const ran = spawnSync('unshare', ['-rm', 'sh', '-c', script], { encoding: 'utf8', timeout: 60_000 });
      expect(ran.status, ran.stderr).toBe(0);
      const [filled, checked] = ran.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line));
      expect(filled.code).toBe('SQLITE_FULL');
      expect(filled.acknowledged).toBeGreaterThan(20);
      expect(checked).toEqual({ integrity: 'ok', rows: filled.acknowledged * 4 });
    },
    90_000,
  );
});
