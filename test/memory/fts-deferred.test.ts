import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { createMemoryService } from '../../src/memory/index.js';
import { createSqliteDatabase, migrate, type SqliteDatabase } from '../../src/store/index.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';
import { sessionRef } from './memory-fixtures.js';

/**
 * SQLite's full-text index takes new entries in batches (migration 0027): a commit that writes entries does
 * not index them, a search does before it reads, and a timer does shortly after the insert.
 */
describe('the full-text index written in batches (SQLite)', () => {
  let dir: string;
  let db: SqliteDatabase;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agentd-fts-deferred-'));
    db = createSqliteDatabase({ path: join(dir, 'agentd.db') });
    await migrate(db);
  });
  afterEach(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** What the index itself holds for a term (no search, so nothing brings it up to date). */
  const indexed = async (term: string) =>
    (
      await db.all<{ memoryId: number }>(
        'SELECT e.memory_id AS memoryId FROM memory_fts JOIN memory_entries e ON e.id = memory_fts.rowid ' +
          'WHERE memory_fts MATCH ? ORDER BY e.memory_id',
        [term],
      )
    ).map((row) => row.memoryId);
  const mark = async () =>
    Number((await db.get<{ up_to: number }>('SELECT up_to FROM memory_fts_indexed WHERE id = 1'))?.up_to);
  const memoryOn = (database: SqliteDatabase) => createMemoryService({ db: database, bus: createBus() });
  const found = async (memory: ReturnType<typeof memoryOn>, query: string) =>
    (await memory.search({ agentId: 'alpha', query, limit: 10 })).map((hit) => hit.memoryId).sort();
  const addresses = async (memory: ReturnType<typeof memoryOn>, query: string) =>
    (await memory.search({ agentId: 'alpha', query, limit: 10 })).map((hit) => hit.address).sort();

  it('leaves a commit unindexed, and a search finds every committed entry anyway', async () => {
    const memory = memoryOn(db);
    await memory.appendBatch(sessionRef(), [
      { role: 'user', content: 'We keep bees on the roof.' },
      { role: 'assistant', content: 'How many hives?' },
    ]);
    expect(await indexed('bees')).toEqual([]);
    expect(await found(memory, 'bees')).toEqual([1, 2]);
    // The search indexed them, each with the turns before it, as the insert trigger did.
    expect(await indexed('bees')).toEqual([1, 2]);
    expect(await indexed('before : bees')).toEqual([2]);
    expect(await mark()).toBe(2);
  });

  it("lets automatic recall leave the asking session's own new turns unindexed, never another session's", async () => {
    const memory = memoryOn(db);
    await memory.append(sessionRef('old'), { role: 'user', content: 'The lighthouse keeper waved.' });
    const ask = { agentId: 'alpha', sessionKey: 'agent:alpha:main', query: 'lighthouse keeper' };
    const listed = async () =>
      [...(await memory.recallForPrompt(ask)).matchAll(/^- \[([^,]+),/gm)].map((m) => m[1]);
    expect(await listed()).toEqual(['agent:alpha:old#1']);
    // The store's first search started a background index merge, which brings the index up to date too.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const indexedUpTo = await mark();
    // The asking message, committed just before the recall, is in the session's context: the recall could
    // not list it, so it does not wait for it to be indexed (the timer after the insert does that).
    await memory.append(sessionRef('main'), { role: 'user', content: 'Did the lighthouse keeper wave?' });
    expect(await listed()).toEqual(['agent:alpha:old#1']);
    expect(await mark()).toBe(indexedUpTo);
    // Another session's entry is indexed before the recall reads, with the asking one's before it.
    await memory.append(sessionRef('other'), {
      role: 'user',
      content: 'A second lighthouse keeper arrived.',
    });
    expect((await listed()).sort()).toEqual(['agent:alpha:old#1', 'agent:alpha:other#1']);
    expect(await mark()).toBe(indexedUpTo + 2);
  });

  it("lets automatic recall leave unindexed the tombstones its session's turn wrote as it evicted", async () => {
    const memory = createMemoryService({ db, bus: createBus(), config: { maxActiveEntries: 2 } });
    await memory.append(sessionRef('old'), { role: 'user', content: 'The lighthouse keeper waved.' });
    await memory.appendBatch(sessionRef('main'), [
      { role: 'user', content: 'Any news?' },
      { role: 'assistant', content: 'None yet.' },
    ]);
    const ask = { agentId: 'alpha', sessionKey: 'agent:alpha:main', query: 'lighthouse keeper' };
    expect(await memory.recallForPrompt(ask)).toContain('agent:alpha:old#1');
    // The first search's background merge and the insert timer have indexed everything.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const indexedUpTo = await mark();
    // The context holds two: this turn evicts the oldest, writing its tombstone in the same commit.
    await memory.append(sessionRef('main'), { role: 'user', content: 'Did the lighthouse keeper wave?' });
    const tombstones = await db.get<{ n: number }>(
      "SELECT count(*) AS n FROM memory_entries WHERE state = 'tombstone' AND id > ?",
      [indexedUpTo],
    );
    expect(tombstones?.n).toBeGreaterThan(0);
    expect(await memory.recallForPrompt(ask)).toContain('agent:alpha:old#1');
    expect(await mark()).toBe(indexedUpTo);
  });

  it('still answers a search on a full disk, from the index as it is, and catches up once healed', async () => {
    const faulty = createFaultyDatabase(db);
    const memory = createMemoryService({ db: faulty, bus: createBus() });
    await memory.append(sessionRef(), { role: 'user', content: 'The orchard has six pear trees.' });
    expect(await addresses(memory, 'orchard')).toEqual(['agent:alpha:main#1']);
    // The store's first search started a background index merge, which brings the index up to date too.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await memory.append(sessionRef('other'), { role: 'user', content: 'And one old orchard wall.' });
    faulty.failWrites();
    // The batch is refused: the search reads what the index holds, without the entry written last.
    expect(await addresses(memory, 'orchard')).toEqual(['agent:alpha:main#1']);
    expect(faulty.refused).toBeGreaterThan(0);
    faulty.heal();
    expect(await addresses(memory, 'orchard')).toEqual(['agent:alpha:main#1', 'agent:alpha:other#1']);
  });

  it('indexes shortly after an insert when nothing searches', async () => {
    await memoryOn(db).append(sessionRef(), { role: 'user', content: 'The lighthouse keeper waved.' });
    expect(await indexed('lighthouse')).toEqual([]);
    await vi.waitFor(async () => expect(await indexed('lighthouse')).toEqual([1]), {
      timeout: 2_000,
      interval: 20,
    });
  });

  it('indexes a bulk load as it goes, not all at once at the first search', async () => {
    // Limits the load stays under: each batch is one commit, so no timer can index between an append's
    // commit and its eviction's (it did once, in a busy suite).
    const memory = createMemoryService({
      db,
      bus: createBus(),
      config: { maxActiveEntries: 10_000, maxActiveTokens: 1_000_000 },
    });
    const turns = (from: number, count: number) =>
      Array.from({ length: count }, (_, index) => ({
        role: 'user' as const,
        content: `pelican sighting ${from + index}`,
      }));
    const rows = async () =>
      Number((await db.get<{ n: number }>('SELECT count(*) AS n FROM memory_entries'))?.n);
    await memory.appendBatch(sessionRef(), turns(0, 1_900));
    expect(await rows()).toBe(1_900);
    expect(await mark()).toBe(0);
    // The commit that passes 2,000 unindexed rows indexes every one of them itself.
    await memory.appendBatch(sessionRef(), turns(1_900, 200));
    expect(await rows()).toBeGreaterThanOrEqual(2_000);
    const upTo = await mark();
    expect(upTo).toBeGreaterThanOrEqual(2_000);
    const entriesUpTo = await db.get<{ n: number }>(
      "SELECT count(*) AS n FROM memory_entries WHERE id <= ? AND state <> 'tombstone'",
      [upTo],
    );
    expect((await indexed('pelican')).length).toBe(Number(entriesUpTo?.n));
    expect(Number(entriesUpTo?.n)).toBe(2_100);
  });

  it('indexes an entry as it is when its batch comes: changed first, or never when deleted first', async () => {
    const memory = memoryOn(db);
    await memory.appendBatch(sessionRef(), [
      { role: 'user', content: 'Apricot jam recipe.' },
      { role: 'user', content: 'Quince paste recipe.' },
    ]);
    await db.run("UPDATE memory_entries SET content = 'Plum jam recipe.' WHERE memory_id = 1");
    await db.run('DELETE FROM memory_entries WHERE memory_id = 2');
    expect(await found(memory, 'recipe')).toEqual([1]);
    expect(await indexed('apricot')).toEqual([]);
    expect(await indexed('plum')).toEqual([1]);
    expect(await indexed('quince')).toEqual([]);
    // Once indexed, the triggers keep the index in step again, the turns before a changed entry included.
    await memory.append(sessionRef(), { role: 'assistant', content: 'Mine sets too hard.' });
    expect(await found(memory, 'hard')).toContain(3);
    expect(await indexed('before : plum')).toEqual([3]);
    await db.run("UPDATE memory_entries SET content = 'Fig jam recipe.' WHERE memory_id = 1");
    expect(await indexed('content : plum')).toEqual([]);
    expect(await indexed('fig')).toEqual([1]);
    // A changed entry's own row only: #3 keeps the words #1 had when #3 was indexed, until #3 changes.
    expect(await indexed('before : plum')).toEqual([3]);
    await db.run("UPDATE memory_entries SET content = 'It never sets.' WHERE memory_id = 3");
    expect(await indexed('before : fig')).toEqual([3]);
    expect(await indexed('never')).toEqual([3]);
    await db.run('DELETE FROM memory_entries WHERE memory_id = 1');
    expect(await indexed('content : fig')).toEqual([]);
  });

  it('finds entries another process committed and never indexed (it stopped first)', async () => {
    const writer = createSqliteDatabase({ path: join(dir, 'agentd.db') });
    await memoryOn(writer).append(sessionRef(), { role: 'user', content: 'The ferry leaves at noon.' });
    await writer.close();
    expect(await indexed('ferry')).toEqual([]);
    expect(await found(memoryOn(db), 'ferry')).toEqual([1]);
  });

  it("sees another process's later entries within the age of its row-id read", async () => {
    const memory = memoryOn(db);
    await memory.append(sessionRef(), { role: 'user', content: 'Our kayak is red.' });
    expect(await found(memory, 'kayak')).toEqual([1]);
    const writer = createSqliteDatabase({ path: join(dir, 'agentd.db') });
    try {
      await memoryOn(writer).append(sessionRef(), { role: 'user', content: 'A second kayak, blue.' });
      await vi.waitFor(async () => expect(await found(memory, 'kayak')).toEqual([1, 2]), {
        timeout: 3_000,
        interval: 50,
      });
    } finally {
      await writer.close();
    }
  });
});
