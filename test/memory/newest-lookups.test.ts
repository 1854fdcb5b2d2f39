import { describe, expect, it, vi } from 'vitest';
import { createSqliteDatabase } from '../../src/store/index.js';
import { createManualClock } from '../../src/util/index.js';
import { useMigratedSqliteFile } from '../helpers/databases.js';
import { createHarness, hangars, sessionRef } from './memory-fixtures.js';

const { config, ask, turns } = hangars;

/**
 * Past the row budget, automatic recall lists a term's newest matches; on SQLite the full-text lookup that
 * names them is kept by term and answers the next recall while it would name the same rows outside the
 * asking context: a conversation's recurring word is looked up again on every turn.
 */
describe("automatic recall's kept newest-match lookups (SQLite)", () => {
  const file = useMigratedSqliteFile('agentd-newest-lookups-');

  /** A service whose "main" context holds 30 turns about hangars, after 30 of "old" and 12 of "gone". */
  const seeded = async () => {
    const { memory } = createHarness(file.db(), { config });
    await memory.appendBatch(sessionRef('old'), turns('old', 1, 30));
    await memory.appendBatch(sessionRef('gone'), turns('gone', 1, 12));
    await memory.appendBatch(sessionRef('main'), turns('main', 1, 30));
    return memory;
  };
  /** The block's addresses and the newest-match lookups the recall made. */
  const recall = async (memory: Awaited<ReturnType<typeof seeded>>) => {
    const reads = vi.spyOn(file.db(), 'all');
    try {
      const block = await memory.recallForPrompt(ask);
      const lookups = reads.mock.calls.filter(([sql]) =>
        sql.includes('FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid DESC'),
      ).length;
      return { block, listed: [...block.matchAll(/^- \[([^,]+),/gm)].map((match) => match[1]), lookups };
    } finally {
      reads.mockRestore();
    }
  };
  const gone = (from: number) => Array.from({ length: 8 }, (_, index) => `agent:alpha:gone#${from - index}`);

  it('reuses the lookup while only the asking context was written, and lists what a fresh service lists', async () => {
    const memory = await seeded();
    const first = await recall(memory);
    expect(first.listed).toEqual(gone(12));
    expect(first.lookups).toBe(1);
    // The conversation's next turns repeat the word: they are the newest matches, all in its context.
    await memory.appendBatch(sessionRef('main'), turns('main', 31, 2));
    await new Promise((resolve) => setTimeout(resolve, 50)); // the insert timer indexes them
    const second = await recall(memory);
    expect(second.lookups).toBe(0);
    expect(second.block).toBe(first.block);
    const fresh = await recall(createHarness(file.db(), { config }).memory);
    expect(fresh.lookups).toBe(1);
    expect(fresh.block).toBe(second.block);
  });

  it("looks again once another session's turn is past the lookup, and lists it", async () => {
    const memory = await seeded();
    expect((await recall(memory)).lookups).toBe(1);
    await memory.append(sessionRef('gone'), { role: 'user', content: 'gone hangar 13' });
    const after = await recall(memory);
    expect(after.lookups).toBe(1);
    expect(after.listed).toEqual(gone(13));
    // Kept again: the next turn of the asking session reuses it.
    await memory.appendBatch(sessionRef('main'), turns('main', 31, 2));
    expect(await recall(memory)).toMatchObject({ lookups: 0, listed: gone(13) });
  });

  it('never lists a row deleted after the lookup, by this service or by another connection', async () => {
    const memory = await seeded();
    expect((await recall(memory)).listed).toEqual(gone(12));
    await memory.deleteSessionKey('agent:alpha:gone');
    const afterDelete = await recall(memory);
    expect(afterDelete.lookups).toBe(1);
    expect(afterDelete.listed).toEqual(
      Array.from({ length: 8 }, (_, index) => `agent:alpha:old#${30 - index}`),
    );
    // Another process forgets "old" while this one keeps its lookup of "old"'s rows.
    const other = createSqliteDatabase({ path: file.path() });
    try {
      await createHarness(other, { config }).memory.deleteSessionKey('agent:alpha:old');
    } finally {
      await other.close();
    }
    const afterOther = await recall(memory);
    expect(afterOther.lookups).toBe(1);
    expect(afterOther.listed).toEqual([]);
  });

  it('never lists a row that retention deleted after the lookup', async () => {
    const clock = createManualClock();
    const dayMs = 24 * 60 * 60 * 1000;
    const { memory } = createHarness(file.db(), {
      clock,
      config: { ...config, retention: { archivedMaxAgeMs: dayMs } },
    });
    await memory.appendBatch(sessionRef('old'), turns('old', 1, 30));
    await memory.appendBatch(sessionRef('gone'), turns('gone', 1, 12));
    await memory.archive('s-alpha-gone', 'reset');
    await memory.appendBatch(sessionRef('main'), turns('main', 1, 30));
    expect((await recall(memory)).listed).toEqual(gone(12));
    clock.advance(2 * dayMs);
    expect(await memory.applyRetention()).toMatchObject({ archivedSessionsDeleted: 1, entriesDeleted: 12 });
    const after = await recall(memory);
    expect(after.lookups).toBe(1);
    expect(after.listed).toEqual(Array.from({ length: 8 }, (_, index) => `agent:alpha:old#${30 - index}`));
  });
});
