import { describe, expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { createMemoryService } from '../../src/memory/index.js';
import { migrate } from '../../src/store/index.js';
import { describeEachDatabase, migrateBefore, openTestDatabase } from '../helpers/databases.js';
import { shippedVersionsFrom } from '../helpers/migrations.js';
import { createHarness, insertOldSchemaRows, sessionRef } from './memory-fixtures.js';

// A question, the turns answering it without its words, and unrelated talk around them.
const dialogue = [
  'Do you still go swimming at the lake?',
  'Not much lately, the water is cold.',
  'Which sport do you practise now?',
  'Guess!',
  'Tennis?',
  'Bouldering, three evenings a week!',
  'My cousin bakes sourdough bread.',
  'Does she sell it?',
];

/** The dialogue's first six lines as rows a memory service wrote before the migration under test. */
const firstTurns = dialogue.slice(0, 6).map((content, index) => ({
  memoryId: index + 1,
  role: index % 2 ? ('assistant' as const) : ('user' as const),
  content,
}));

describeEachDatabase('memory search over neighbouring turns', (getDb) => {
  it('finds a turn through the turns before it, and topic lookups stay on the own words', async () => {
    const { memory } = createHarness(getDb());
    await memory.appendBatch(
      sessionRef(),
      dialogue.map((content, index) => ({
        role: index % 2 ? ('assistant' as const) : ('user' as const),
        content,
      })),
    );
    const hits = await memory.search({ agentId: 'alpha', query: 'Which sport?', limit: 5 });
    // #3 names the sport; #4 and #5 follow it one and two turns later without the word; #8 is far off.
    const addresses = hits.map((hit) => hit.address);
    expect(addresses.slice(0, 3).sort()).toEqual([
      'agent:alpha:main#3',
      'agent:alpha:main#4',
      'agent:alpha:main#5',
    ]);
    expect(addresses).not.toContain('agent:alpha:main#8');
    expect(hits.map((hit) => hit.score)).toEqual([...hits.map((hit) => hit.score)].sort((a, b) => b - a));
    // Only the entry's own words count for a topic phrase.
    const topic = await memory.query({ agentId: 'alpha', topic: 'which sport' });
    expect(topic.map((item) => item.id)).toEqual([3]);
    expect(await memory.query({ agentId: 'alpha', topic: 'tennis sport' })).toEqual([]);
  });

  it('links turns across eviction tombstones, not across session keys', async () => {
    const { memory } = createHarness(getDb(), { config: { maxActiveEntries: 4 } });
    for (const [index, content] of dialogue.entries()) {
      await memory.append(sessionRef(), { role: index % 2 ? 'assistant' : 'user', content });
    }
    await memory.append(sessionRef('other'), { role: 'user', content: 'Chess, mostly.' });
    const hits = await memory.search({ agentId: 'alpha', query: 'Which sport?', limit: 3, kind: 'entry' });
    // Evictions put tombstones between the turns' MemoryIDs; the two turns after the question still link.
    expect(hits.map((hit) => hit.content).sort()).toEqual([
      'Guess!',
      'Tennis?',
      'Which sport do you practise now?',
    ]);
    expect(hits.every((hit) => hit.sessionKey === 'agent:alpha:main' && hit.state !== 'tombstone')).toBe(
      true,
    );
    expect(await memory.search({ agentId: 'alpha', query: 'chess' })).toMatchObject([
      { address: 'agent:alpha:other#1' },
    ]);
  });
});

describeEachDatabase('search with excluded addresses', (getDb) => {
  it('widens the ranking until enough entries outside the exclusions are found', async () => {
    const { memory } = createHarness(getDb());
    await memory.appendBatch(
      sessionRef('many'),
      Array.from({ length: 12 }, (_, index) => ({
        role: 'user' as const,
        content: `kiwi ${'kiwi '.repeat(12 - index)}note ${index}`,
      })),
    );
    const all = await memory.search({ agentId: 'alpha', query: 'kiwi', limit: 12, mode: 'fts' });
    expect(all).toHaveLength(12);
    const excluded = new Set(all.slice(0, 10).map((hit) => hit.address));
    const rest = await memory.search({
      agentId: 'alpha',
      query: 'kiwi',
      limit: 2,
      mode: 'fts',
      excludeAddresses: excluded,
    });
    expect(rest.map((hit) => hit.address)).toEqual(all.slice(10).map((hit) => hit.address));
  });
});

describe('migrations 0014 and 0015 index existing entries with the turns before them', () => {
  for (const dialect of ['sqlite', 'postgres'] as const) {
    it(`backfills ${dialect} and keeps indexing new turns`, async () => {
      const db = await openTestDatabase(dialect, { migrate: false });
      try {
        await migrateBefore(db, 14);
        await insertOldSchemaRows(db, sessionRef(), firstTurns);
        expect((await migrate(db)).applied).toEqual(expect.arrayContaining([14, 15]));
        const memory = createMemoryService({ db, bus: createBus() });
        const found = async () =>
          (await memory.search({ agentId: 'alpha', query: 'Which sport?', limit: 10 })).map(
            (hit) => hit.memoryId,
          );
        expect(await found()).toEqual(expect.arrayContaining([3, 4, 5, 6]));
        expect(await found()).not.toContain(7);
        // A turn written after the migration is linked to the ones before it by the trigger.
        await memory.append(sessionRef(), { role: 'user', content: 'My cousin bakes sourdough bread.' });
        expect(await found()).toContain(7);
        expect(
          (await memory.search({ agentId: 'alpha', query: 'sourdough', limit: 10 })).map(
            (hit) => hit.memoryId,
          ),
        ).toEqual(expect.arrayContaining([7, 6, 5]));
      } finally {
        await db.close();
      }
    });
  }
});

describe('migration 0026: a full-text index without a copy of the text (SQLite)', () => {
  it('keeps what was indexed at 0025 searchable, and re-indexes an entry whose text changes', async () => {
    const db = await openTestDatabase('sqlite', { migrate: false });
    try {
      await migrateBefore(db, 26);
      await insertOldSchemaRows(db, sessionRef(), firstTurns);
      expect((await migrate(db)).applied).toEqual(shippedVersionsFrom(26));
      // Nothing but the index is kept: no content table beside it (0027 adds the index's one-row mark, 0028
      // the view of what it holds for an entry).
      const tables = await db.all<{ name: string }>(
        "SELECT name FROM sqlite_master WHERE name LIKE 'memory_fts%' ORDER BY name",
      );
      expect(tables.map((table) => table.name)).toEqual([
        'memory_fts',
        'memory_fts_config',
        'memory_fts_data',
        'memory_fts_docsize',
        'memory_fts_idx',
        'memory_fts_indexed',
        'memory_fts_rows',
      ]);
      const memory = createMemoryService({ db, bus: createBus() });
      const ids = async (query: string) =>
        (await memory.search({ agentId: 'alpha', query, limit: 10 })).map((hit) => hit.memoryId).sort();
      // Rows indexed before the migration, with the turns before them.
      expect(await ids('Which sport?')).toEqual(expect.arrayContaining([3, 4, 5, 6]));
      // The index itself (a search adds each hit's neighbouring turns): a changed text matches by its new
      // words only, and a deleted row leaves the index.
      const indexed = async (term: string) =>
        (
          await db.all<{ memoryId: number }>(
            'SELECT e.memory_id AS memoryId FROM memory_fts JOIN memory_entries e ON e.id = memory_fts.rowid WHERE memory_fts MATCH ?',
            [term],
          )
        ).map((row) => row.memoryId);
      expect(await indexed('bouldering')).toEqual([6]);
      await db.run("UPDATE memory_entries SET content = 'Climbing walls, mostly.' WHERE memory_id = 6");
      expect(await indexed('bouldering')).toEqual([]);
      expect(await indexed('climbing')).toEqual([6]);
      expect(await ids('climbing')).toContain(6);
      await db.run('DELETE FROM memory_entries WHERE memory_id = 6');
      expect(await indexed('climbing')).toEqual([]);
    } finally {
      await db.close();
    }
  });
});
