import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { MemoryConfigInput, SessionRef } from '../../src/memory/index.js';
import { appendBatch } from '../../src/memory/service/ram.js';
import { pendingCount, retryWrites } from '../../src/memory/service/write-retry.js';
import { migrate, type SqlDatabase } from '../../src/store/index.js';
import { describeEachDatabase, migrateBefore, openTestDatabase } from '../helpers/databases.js';
import { shippedVersionsFrom } from '../helpers/migrations.js';
import { createHarness, insertOldSchemaRows, sessionRef } from './memory-fixtures.js';
import { breakableDatabase, loaded, stepContext } from './service/helpers.js';

// A session instance's entries are found through the key's (session_key, memory_id) index from the ids its
// memory_sessions row keeps (migration 0032): first_memory_id below every id it wrote, live_from_id below
// every id of its active entries. A bound too high loses entries from the context at the next load.

/** The instance's stored range, and the lowest id of its entries that are active in the database. */
async function rangeOf(db: SqlDatabase, sessionId: string) {
  const row = await db.get<{ first: number | null; live_from: number | null; lowest_active: number | null }>(
    'SELECT s.first_memory_id AS first, s.live_from_id AS live_from, (SELECT min(e.memory_id) FROM memory_entries e ' +
      "WHERE e.session_id = s.session_id AND e.state = 'active' AND e.archived_at_ms IS NULL) AS lowest_active " +
      'FROM memory_sessions s WHERE s.session_id = ?',
    [sessionId],
  );
  const number = (value: number | null | undefined) => (value == null ? null : Number(value));
  return {
    first: number(row?.first),
    liveFrom: number(row?.live_from),
    lowestActive: number(row?.lowest_active),
  };
}

const turn = (index: number) => [
  { role: 'user' as const, content: `question ${index}` },
  { role: 'assistant' as const, content: `answer ${index}` },
];

const contentsOf = (entries: ReadonlyArray<{ content: string }>) => entries.map((entry) => entry.content);

describeEachDatabase("a session instance's id range", (getDb) => {
  const config: MemoryConfigInput = { maxActiveEntries: 8, maxRamTombstones: 6 };

  it('moves up as the session evicts, and a restart loads the same context from it', async () => {
    const db = getDb();
    const { memory, clock } = createHarness(db, { config });
    const ref = sessionRef();
    for (let index = 0; index < 60; index++) {
      // Past the stored activity's second: every commit writes the range.
      clock.advance(1_500);
      await memory.appendBatch(ref, turn(index));
      const range = await rangeOf(db, ref.sessionId);
      expect(range.liveFrom).toBeLessThanOrEqual(range.lowestActive!);
    }
    const range = await rangeOf(db, ref.sessionId);
    expect(range.first).toBe(1);
    // 120 entries and their tombstones: the active ones are among the newest ids, and so is the bound.
    expect(range.lowestActive).toBeGreaterThan(200);
    expect(range.liveFrom).toBeGreaterThan(range.lowestActive! - 12);
    const before = await memory.stats(ref);
    const context = await memory.load(ref);
    expect(contentsOf(context).at(-1)).toBe('answer 59');

    const restarted = createHarness(db, { config }).memory;
    expect(await restarted.load(ref)).toEqual(context);
    expect(await restarted.stats(ref)).toMatchObject({
      activeEntries: before.activeEntries,
      tombstones: before.tombstones,
      nextMemoryId: before.nextMemoryId,
    });
  });

  it("starts a new instance's range after the key's earlier ids; its load and archive leave the old one's entries", async () => {
    const db = getDb();
    const { memory, clock } = createHarness(db, { config });
    const first = sessionRef();
    const second: SessionRef = { ...first, sessionId: 's-alpha-main-2' };
    for (let index = 0; index < 3; index++) await memory.appendBatch(first, turn(index));
    await memory.archive(first.sessionId, 'reset');
    clock.advance(60_000);
    await memory.appendBatch(second, turn(3));
    expect(await rangeOf(db, second.sessionId)).toEqual({ first: 7, liveFrom: 7, lowestActive: 7 });

    // Read again from the database.
    expect(await memory.unload(second.sessionId)).toBe(true);
    expect(contentsOf(await memory.load(second))).toEqual(['question 3', 'answer 3']);
    const archived = await memory.archive(second.sessionId, 'reset');
    expect(archived.entryCount).toBe(2);
    const byInstance = await db.all<{ session_id: string; archived_at_ms: number; n: number }>(
      'SELECT session_id, archived_at_ms, count(*) AS n FROM memory_entries GROUP BY session_id, archived_at_ms ORDER BY session_id',
    );
    expect(byInstance.map((row) => [row.session_id, Number(row.n)])).toEqual([
      [first.sessionId, 6],
      [second.sessionId, 2],
    ]);
    expect(Number(byInstance[1]!.archived_at_ms) - Number(byInstance[0]!.archived_at_ms)).toBe(60_000);
  });

  it('deletes an expired instance by its range, and its ids are not handed out again', async () => {
    const db = getDb();
    const { memory, clock } = createHarness(db, {
      config: { ...config, retention: { archivedSessionsPerKey: 1 } },
    });
    const instance = (n: number): SessionRef => ({ ...sessionRef(), sessionId: `s-alpha-main-${n}` });
    for (let n = 1; n <= 3; n++) {
      await memory.appendBatch(instance(n), turn(n));
      clock.advance(1_000);
      await memory.archive(instance(n).sessionId, 'reset');
    }
    expect(await memory.applyRetention()).toMatchObject({ archivedSessionsDeleted: 2, entriesDeleted: 4 });
    const left = await db.all<{ session_id: string; memory_id: number }>(
      'SELECT session_id, memory_id FROM memory_entries ORDER BY memory_id',
    );
    expect(left.map((row) => [row.session_id, Number(row.memory_id)])).toEqual([
      ['s-alpha-main-3', 5],
      ['s-alpha-main-3', 6],
    ]);
    const [next] = await memory.appendBatch(instance(4), turn(4));
    expect(next!.memoryId).toBe(7);
  });
});

describeEachDatabase('an instance whose load failed', (getDb) => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('keeps the stored bound of the entries it could not read', async () => {
    const config: MemoryConfigInput = { maxActiveEntries: 4, writeRetryMs: 100 };
    const ref = sessionRef();
    const first = stepContext(getDb(), { config });
    for (let index = 0; index < 10; index++) {
      first.clock.advance(1_500);
      await appendBatch(first.ctx, ref, turn(index));
    }
    const stored = await rangeOf(getDb(), ref.sessionId);
    expect(stored.liveFrom).toBeGreaterThan(20);

    // Another process (a restart) cannot read the session: RAM starts without its active entries.
    const db = breakableDatabase(getDb());
    const second = stepContext(db, { config });
    // Its own clock, an hour on: the two write events with the same sequential ids.
    second.clock.advance(3_600_000);
    db.broken = true;
    expect((await loaded(second.ctx)).entries).toEqual([]);
    db.broken = false;
    await retryWrites(second.ctx);
    expect(second.ctx.writes.degradedReason).toBeUndefined();
    for (let index = 10; index < 13; index++) {
      second.clock.advance(1_500);
      await appendBatch(second.ctx, ref, turn(index));
    }
    expect(pendingCount(second.ctx)).toBe(0);
    const after = await rangeOf(getDb(), ref.sessionId);
    expect(after.liveFrom).toBe(stored.liveFrom);
    expect(after.liveFrom).toBeLessThanOrEqual(after.lowestActive!);
  });
});

describeEachDatabase('an instance another process writes too', (getDb) => {
  it("keeps the stored bound below the other writer's entries", async () => {
    const config: MemoryConfigInput = { maxActiveEntries: 4 };
    const ref = sessionRef();
    const here = stepContext(getDb(), { config });
    const there = stepContext(getDb(), { config });
    // Its own clock, an hour on: the two write events with the same sequential ids.
    there.clock.advance(3_600_000);
    for (let index = 0; index < 3; index++) {
      here.clock.advance(1_500);
      await appendBatch(here.ctx, ref, turn(index));
    }
    await appendBatch(there.ctx, ref, turn(100));
    const theirs = await getDb().all<{ memory_id: number }>(
      "SELECT memory_id FROM memory_entries WHERE content IN ('question 100', 'answer 100') ORDER BY memory_id",
    );
    // This process's context does not hold them, and evicts its own entries past them.
    for (let index = 3; index < 8; index++) {
      here.clock.advance(1_500);
      await appendBatch(here.ctx, ref, turn(index));
    }
    const range = await rangeOf(getDb(), ref.sessionId);
    expect(range.lowestActive).toBe(Number(theirs[0]!.memory_id));
    expect(range.liveFrom).toBeLessThanOrEqual(range.lowestActive!);
  });
});

describe('migration 0032', () => {
  for (const dialect of ['sqlite', 'postgres'] as const) {
    it(`records the id range of each instance stored before it [${dialect}]`, async () => {
      const db = await openTestDatabase(dialect, { migrate: false });
      try {
        await migrateBefore(db, 32);
        const main = sessionRef('main');
        const done = sessionRef('done');
        const empty = sessionRef('empty');
        await insertOldSchemaRows(db, main, [
          { memoryId: 1, role: 'user', content: 'my cat is called Pixel', state: 'evicted' },
          { memoryId: 2, role: 'assistant', content: 'Pixel, noted', state: 'evicted' },
          { memoryId: 3, role: 'user', content: 'and the dog?' },
          { memoryId: 4, role: 'assistant', content: 'you did not say' },
          {
            memoryId: 5,
            role: 'system',
            content: '[evicted:1]',
            state: 'tombstone',
            relatedTo: 1,
            orderKey: 1,
          },
          {
            memoryId: 6,
            role: 'system',
            content: '[evicted:2]',
            state: 'tombstone',
            relatedTo: 2,
            orderKey: 2,
          },
        ]);
        await insertOldSchemaRows(db, done, [
          { memoryId: 1, role: 'user', content: 'gone', state: 'evicted' },
          {
            memoryId: 2,
            role: 'system',
            content: '[evicted:1]',
            state: 'tombstone',
            relatedTo: 1,
            orderKey: 1,
          },
        ]);
        await insertOldSchemaRows(db, empty, []);
        expect((await migrate(db)).applied).toEqual(shippedVersionsFrom(32));

        expect(await rangeOf(db, main.sessionId)).toEqual({ first: 1, liveFrom: 3, lowestActive: 3 });
        expect(await rangeOf(db, done.sessionId)).toEqual({ first: 1, liveFrom: 3, lowestActive: null });
        expect(await rangeOf(db, empty.sessionId)).toEqual({
          first: null,
          liveFrom: null,
          lowestActive: null,
        });
        const indexes = await db.all<{ name: string }>(
          dialect === 'sqlite'
            ? "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'memory_entries'"
            : "SELECT indexname AS name FROM pg_indexes WHERE tablename = 'memory_entries' AND schemaname = current_schema()",
        );
        expect(indexes.map((index) => index.name)).not.toContain('memory_entries_by_session');

        const { memory } = createHarness(db);
        expect(contentsOf(await memory.load(main))).toEqual(['and the dog?', 'you did not say']);
        expect(await memory.stats(main)).toMatchObject({ activeEntries: 2, tombstones: 2, nextMemoryId: 7 });
        expect(await memory.load(done)).toEqual([]);
        expect(await memory.stats(done)).toMatchObject({ tombstones: 1, nextMemoryId: 3 });
        await memory.appendBatch(empty, turn(0));
        expect(await rangeOf(db, empty.sessionId)).toEqual({ first: 1, liveFrom: 1, lowestActive: 1 });
      } finally {
        await db.close();
      }
    });
  }
});
