import { afterEach, expect, it, vi } from 'vitest';
import { createMemoryManager } from '../../src/memory/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

const minuteMs = 60_000;

describeEachDatabase('memory manager', (getDb) => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const config = {
    maxActiveEntries: 8,
    summarizeBatch: 3,
    managerIntervalMs: minuteMs,
    thresholds: {
      summarizeRatio: 0.75,
      staleAfterMs: 30 * minuteMs,
      keepRecentEntries: 2,
      maxSummariesPerTick: 2,
      unloadIdleAfterMs: 120 * minuteMs,
    },
  };

  it('runs on its own schedule and keeps a context under its threshold, with a snapshot', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const { memory, bus, clock } = createHarness(getDb(), { config });
    const ref = sessionRef();
    for (let index = 1; index <= 8; index++)
      await memory.append(ref, { role: 'user', content: `message ${index}` });
    const manager = createMemoryManager({ memory, clock });
    const snapshot = new Promise((resolve) =>
      bus.on('memory:event', (event) => event.data.kind === 'snapshot' && resolve(event.data)),
    );
    manager.start();
    expect(manager.running).toBe(true);
    vi.advanceTimersByTime(minuteMs);
    expect(await snapshot).toMatchObject({ reason: 'memory-manager auto snapshot' });
    await manager.stop();
    const stats = await memory.stats(ref);
    expect(stats.activeEntries).toBeLessThanOrEqual(6);
    const loaded = await memory.load(ref);
    expect(loaded[0]!.kind).toBe('summary');
    expect(loaded.at(-1)!.content).toBe('message 8');
  });

  it('summarizes stale sessions down to the recent entries and unloads idle ones', async () => {
    const { memory, clock, events } = createHarness(getDb(), { config });
    const ref = sessionRef();
    for (let index = 1; index <= 5; index++)
      await memory.append(ref, { role: 'user', content: `message ${index}` });
    const manager = createMemoryManager({ memory, clock });
    expect(await manager.tick()).toMatchObject({ summaries: 0, snapshots: 0 });
    clock.advance(31 * minuteMs);
    expect(await manager.tick()).toMatchObject({ summaries: 1, snapshots: 1 });
    expect(events.find((event) => event.kind === 'summarized')).toMatchObject({
      reason: 'stale',
      memoryIds: [1, 2, 3],
    });
    expect((await memory.load(ref)).map((entry) => entry.kind)).toEqual(['summary', 'entry', 'entry']);
    clock.advance(121 * minuteMs);
    expect(await manager.tick()).toMatchObject({ unloaded: 1 });
    expect(memory.loadedSessions()).toEqual([]);
    expect((await memory.load(ref)).length).toBe(3);
  });

  it('never touches entries pinned by a running turn', async () => {
    const { memory, clock } = createHarness(getDb(), { config });
    const ref = sessionRef();
    for (let index = 1; index <= 8; index++)
      await memory.append(ref, { role: 'user', content: `message ${index}` });
    const lease = await memory.pin(ref, [1, 2]);
    const manager = createMemoryManager({ memory, clock });
    expect(await manager.tick()).toMatchObject({ summaries: 0 });
    expect((await memory.load(ref)).map((entry) => entry.memoryId)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    lease.release();
    expect(await manager.tick()).toMatchObject({ summaries: 1 });
    const after = await memory.load(ref);
    expect(after[0]).toMatchObject({ kind: 'summary', sourceIds: [1, 2, 3] });
    expect(after).toHaveLength(6);
  });

  it('does not overlap ticks and applies retention on its cadence', async () => {
    const { memory, clock } = createHarness(getDb(), { config });
    await memory.append(sessionRef(), { role: 'user', content: 'hello' });
    const manager = createMemoryManager({ memory, clock, retentionEveryTicks: 2 });
    const first = manager.tick();
    expect(manager.tick()).toBe(first);
    expect((await first).retention).toBe(false);
    expect((await manager.tick()).retention).toBe(true);
  });
});

describeEachDatabase('memory restart', (getDb) => {
  it('restores each session from the database in a new service instance', async () => {
    const first = createHarness(getDb(), { config: { maxActiveEntries: 3 } });
    const ref = sessionRef();
    for (let index = 1; index <= 5; index++)
      await first.memory.append(ref, { role: 'user', content: `m${index}` });
    await first.memory.summarize(ref, { maxEntries: 2 });
    const before = await first.memory.load(ref);
    const second = createHarness(getDb(), { config: { maxActiveEntries: 3 } });
    expect(await second.memory.load(ref)).toEqual(before);
    expect((await second.memory.stats(ref)).tombstones).toBe((await first.memory.stats(ref)).tombstones);
  });
});
