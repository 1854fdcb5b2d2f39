import { copyFileSync, mkdirSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLtmStore } from '../../src/memory/ltm-store.js';
import { defaultMigrationsDir, migrate, type SqlDatabase } from '../../src/store/index.js';
import { openTestDatabase } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

/** The shipped migrations up to `version`: a database as an older agentd left it. */
function migrationsUpTo(version: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-migrations-upto-'));
  for (const dialect of ['sqlite', 'postgres']) {
    mkdirSync(join(dir, dialect));
    for (const file of readdirSync(join(defaultMigrationsDir(), dialect)))
      if (Number(file.slice(0, 4)) <= version)
        copyFileSync(join(defaultMigrationsDir(), dialect, file), join(dir, dialect, file));
  }
  return dir;
}

const progress = async (db: SqlDatabase) => {
  const row = await db.get<{ mark: number; highest: number }>(
    'SELECT (SELECT indexed_up_to FROM memory_fts_progress) AS mark, (SELECT max(id) FROM memory_entries) AS highest',
  );
  return { mark: Number(row?.mark), highest: Number(row?.highest) };
};
const indexedRows = async (db: SqlDatabase) =>
  Number((await db.get<{ n: number }>('SELECT count(*) AS n FROM memory_fts'))?.n);
const integrityCheck = (db: SqlDatabase) =>
  db.run("INSERT INTO memory_fts (memory_fts, rank) VALUES ('integrity-check', 1)");

// SQLite's full-text index follows the entries' commits (migration 0022); Postgres writes each entry's
// search vector with it, and the memory suites run every search on both.
describe('the SQLite full-text index behind the entries', () => {
  const opened: SqlDatabase[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((db) => db.close()));
  });
  const open = async (options: { migrate?: boolean } = {}) => {
    const db = await openTestDatabase('sqlite', options);
    opened.push(db);
    return db;
  };

  it('leaves an entry out of the commit that stores it, and a search indexes it first', async () => {
    const db = await open();
    const { memory } = createHarness(db);
    await memory.append(sessionRef(), { role: 'user', content: 'the heron nests by the weir' });
    // Committed, not indexed yet: the index catches up after its delay, or before a read.
    expect(await progress(db)).toEqual({ mark: 0, highest: 1 });
    expect(await indexedRows(db)).toBe(0);
    const hits = await memory.search({ agentId: 'alpha', query: 'heron weir' });
    expect(hits.map((hit) => hit.content)).toEqual(['the heron nests by the weir']);
    expect(await progress(db)).toEqual({ mark: 1, highest: 1 });
    expect(await indexedRows(db)).toBe(1);
  });

  it('catches up on its own soon after the appends, in one transaction for all of them', async () => {
    const db = await open();
    const { memory } = createHarness(db);
    for (let turn = 0; turn < 5; turn++)
      await memory.append(sessionRef(), { role: 'user', content: `lantern ${turn}` });
    const deadline = Date.now() + 5_000;
    while ((await progress(db)).mark < 5 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await progress(db)).toEqual({ mark: 5, highest: 5 });
    const segments = await db.get<{ n: number }>('SELECT count(DISTINCT segid) AS n FROM memory_fts_idx');
    expect(Number(segments?.n)).toBe(1);
  });

  it('indexes what a restart finds unindexed, with the same search context as a live index', async () => {
    const db = await open();
    const live = createHarness(db).memory;
    const turns = ['where do herons nest?', 'by the weir, every spring', 'and the swallows?'];
    for (const content of turns)
      await live.append(sessionRef(), { role: content.endsWith('?') ? 'user' : 'assistant', content });
    // A crash before the index caught up: a new process over the same database.
    const restarted = createHarness(db).memory;
    const hits = await restarted.search({ agentId: 'alpha', query: 'spring' });
    expect(hits[0]?.content).toBe('by the weir, every spring');
    // The third turn is found through the two turns before it (the index's `before` column).
    const before = await db.get<{ before: string }>(
      'SELECT before FROM memory_fts WHERE rowid = (SELECT id FROM memory_entries WHERE memory_id = 3)',
    );
    expect(before?.before).toBe('by the weir, every spring\nwhere do herons nest?');
    await integrityCheck(db);
  });

  it('stays consistent when entries are deleted or changed before they are indexed', async () => {
    const db = await open();
    const { memory } = createHarness(db);
    await memory.append(sessionRef('gone'), { role: 'user', content: 'a kestrel over the ridge' });
    await memory.append(sessionRef('kept'), { role: 'user', content: 'a kestrel in the barn' });
    await db.run("UPDATE memory_entries SET content = 'a kestrel in the old barn' WHERE session_key = ?", [
      'agent:alpha:kept',
    ]);
    await memory.deleteSessionKey('agent:alpha:gone');
    const hits = await memory.search({ agentId: 'alpha', query: 'kestrel' });
    expect(hits.map((hit) => hit.content)).toEqual(['a kestrel in the old barn']);
    await integrityCheck(db);
    // And the other way round: indexed first, then deleted, the row leaves the index.
    await memory.deleteSessionKey('agent:alpha:kept');
    expect(await indexedRows(db)).toBe(0);
    await integrityCheck(db);
  });

  it('takes an older database as fully indexed, and indexes only what comes after', async () => {
    const db = await open({ migrate: false });
    await migrate(db, { dir: migrationsUpTo(21) });
    const older = createLtmStore(db, { sqliteVec: false });
    await older.transaction(async (tx) => {
      await tx.run(
        'INSERT INTO memory_entries (session_key, memory_id, session_id, agent_id, kind, role, state, order_key, content, tokens, created_at_ms, updated_at_ms) ' +
          "VALUES ('agent:alpha:old', 1, 's-alpha-old', 'alpha', 'entry', 'user', 'active', 1, 'an osprey at dawn', 5, 1, 1)",
      );
    });
    // The insert trigger of the older schema indexed it.
    expect(await indexedRows(db)).toBe(1);
    await migrate(db);
    expect(await progress(db)).toEqual({ mark: 1, highest: 1 });
    const { memory } = createHarness(db);
    await memory.append(sessionRef(), { role: 'assistant', content: 'an osprey again at dusk' });
    const hits = await memory.search({ agentId: 'alpha', query: 'osprey' });
    expect(hits.map((hit) => hit.content).sort()).toEqual(['an osprey again at dusk', 'an osprey at dawn']);
    expect(await indexedRows(db)).toBe(2);
    await integrityCheck(db);
  });
});
