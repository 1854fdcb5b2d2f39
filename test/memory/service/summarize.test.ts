import { expect, it } from 'vitest';
import { appendBatch, pinEntries, statsOf, withSession } from '../../../src/memory/service/ram.js';
import { archive } from '../../../src/memory/service/snapshots.js';
import { summarize } from '../../../src/memory/service/summarize.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { countingModel, failingModel, sessionRef } from '../memory-fixtures.js';
import { loaded, stepContext } from './helpers.js';

const turns = [
  { role: 'user' as const, content: 'first question' },
  { role: 'assistant' as const, content: 'first answer' },
  { role: 'user' as const, content: 'second question' },
  { role: 'assistant' as const, content: 'second answer' },
];

describeEachDatabase('memory summarize', (getDb) => {
  it('replaces the oldest entries by a model summary at their position, leaving tombstones', async () => {
    const { ctx, events } = stepContext(getDb(), { model: countingModel() });
    const ref = sessionRef();
    await appendBatch(ctx, ref, turns);
    const result = await summarize(ctx, ref, { maxEntries: 2, reason: 'test' });
    expect(result).toMatchObject({ summarizedIds: [1, 2], method: 'model' });
    expect(result.summary).toMatchObject({ memoryId: 5, kind: 'summary', sourceIds: [1, 2] });
    const ram = await loaded(ctx);
    expect(ram.entries.map((entry) => [entry.memoryId, entry.state])).toEqual([
      [5, 'active'],
      [6, 'tombstone'],
      [7, 'tombstone'],
      [3, 'active'],
      [4, 'active'],
    ]);
    expect(events.at(-1)).toMatchObject({ data: { kind: 'summarized', memoryIds: [1, 2], reason: 'test' } });
    expect(ram.busy.size).toBe(0);
  });

  it('counts the context again after a summary: the next appends evict only once the limit is passed', async () => {
    const { ctx, events } = stepContext(getDb(), {
      model: countingModel(),
      config: { maxActiveEntries: 4, evictDownToRatio: 1 },
    });
    const ref = sessionRef();
    await appendBatch(ctx, ref, turns);
    await summarize(ctx, ref, { maxEntries: 2, reason: 'test' });
    // Three active entries now (the summary and the second exchange): one more fits, the next evicts.
    expect(statsOf(await loaded(ctx))).toMatchObject({ activeEntries: 3 });
    const evictions = () => events.filter((event) => (event.data as { kind?: string }).kind === 'evicted');
    await appendBatch(ctx, ref, [{ role: 'user', content: 'third question' }]);
    expect(evictions()).toHaveLength(0);
    expect(statsOf(await loaded(ctx))).toMatchObject({ activeEntries: 4 });
    await appendBatch(ctx, ref, [{ role: 'assistant', content: 'third answer' }]);
    expect(evictions()).toHaveLength(1);
    expect(statsOf(await loaded(ctx))).toMatchObject({ activeEntries: 4 });
  });

  it('falls back to an extractive summary when the model fails', async () => {
    const { ctx } = stepContext(getDb(), { model: failingModel() });
    await appendBatch(ctx, sessionRef(), turns);
    expect((await summarize(ctx, sessionRef(), { maxEntries: 2 })).method).toBe('extractive');
  });

  it('skips when nothing may be summarized, or an entry was pinned or the session archived meanwhile', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const { ctx } = stepContext(getDb(), { model: countingModel(gate) });
    const ref = sessionRef();
    await appendBatch(ctx, ref, [turns[0]!]);
    expect((await summarize(ctx, ref)).skipped).toBe('nothing-to-summarize');
    await appendBatch(ctx, ref, turns.slice(1));
    const pending = summarize(ctx, ref, { maxEntries: 2 });
    // The model call runs outside the session lock: appends and pins go on meanwhile.
    await appendBatch(ctx, ref, [{ role: 'user', content: 'while summarizing' }]);
    const lease = await withSession(ctx, ref, async (ram) => pinEntries(ctx, ram, [1]));
    open();
    expect((await pending).skipped).toBe('pinned');
    lease.release();
    const ram = await loaded(ctx);
    expect(statsOf(ram).activeEntries).toBe(5);
    expect(ram.busy.size).toBe(0);

    const other = stepContext(getDb(), { model: countingModel(gate) });
    const otherRef = sessionRef('other');
    await appendBatch(other.ctx, otherRef, turns);
    const racing = summarize(other.ctx, otherRef, { maxEntries: 2 });
    await archive(other.ctx, otherRef.sessionId, 'reset');
    expect((await racing).skipped).toBe('session-gone');
  });
});
