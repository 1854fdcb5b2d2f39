import { expect, it, vi } from 'vitest';
import { createBus } from '../../../src/bus/index.js';
import { createMemoryContext, type MemoryContext } from '../../../src/memory/service/context.js';
import { appendBatch, pinEntries, withSession } from '../../../src/memory/service/ram.js';
import { createManualClock, createSequentialIdGenerator } from '../../../src/util/index.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { sessionRef } from '../memory-fixtures.js';

describeEachDatabase('memory RAM context: the loaded-entries budget', (getDb) => {
  const setup = (
    maxLoadedEntries: number,
    limits: { maxActiveEntries?: number; maxRamTombstones?: number } = {},
  ) => {
    const clock = createManualClock();
    const ctx = createMemoryContext({
      db: getDb(),
      bus: createBus(),
      clock,
      idGenerator: createSequentialIdGenerator(),
      config: { maxLoadedEntries, ...limits },
    });
    const talk = async (key: string) => {
      clock.advance(1_000);
      await appendBatch(ctx, sessionRef(key), [
        { role: 'user', content: `hello from ${key}` },
        { role: 'assistant', content: `hi ${key}` },
      ]);
    };
    return { ctx, talk };
  };
  /** Lets the unloads a load queued run (each waits for its session's lock). */
  const settled = (ctx: MemoryContext, keys = ['a', 'b', 'c', 'd']) =>
    Promise.all(keys.map((key) => ctx.mutex.run(sessionRef(key).sessionId, async () => {})));
  const loadedEntries = (ctx: MemoryContext) =>
    [...ctx.sessions.values()].reduce((total, ram) => total + ram.entries.length, 0);
  const loadedKeys = (ctx: MemoryContext) =>
    [...ctx.sessions.values()].map((ram) => ram.ref.sessionKey).sort();

  it('unloads the least recently active sessions past the budget, and they reload whole from the database', async () => {
    const { ctx, talk } = setup(4);
    await talk('a');
    await talk('b');
    await settled(ctx);
    expect(loadedKeys(ctx)).toEqual(['agent:alpha:a', 'agent:alpha:b']);
    await talk('c');
    await settled(ctx);
    // c's append made 6 entries: a, the least recently active, went.
    expect(loadedKeys(ctx)).toEqual(['agent:alpha:b', 'agent:alpha:c']);
    // Sessions that stay loaded count too: b talks again and c, idle since, goes.
    await talk('b');
    await settled(ctx);
    expect(loadedKeys(ctx)).toEqual(['agent:alpha:b']);

    const reloaded = await withSession(ctx, sessionRef('a'), async (ram) =>
      ram.entries.map((entry) => [entry.memoryId, entry.content]),
    );
    expect(reloaded).toEqual([
      [1, 'hello from a'],
      [2, 'hi a'],
    ]);
    await talk('a');
    const ids = await withSession(ctx, sessionRef('a'), async (ram) => ram.entries.map((e) => e.memoryId));
    expect(ids).toEqual([1, 2, 3, 4]);
  });

  it('keeps a pinned session loaded however long it was idle', async () => {
    const { ctx, talk } = setup(2);
    await talk('a');
    const lease = await withSession(ctx, sessionRef('a'), async (ram) => pinEntries(ctx, ram));
    await talk('b');
    await talk('c');
    await settled(ctx);
    expect(loadedKeys(ctx)).toContain('agent:alpha:a');
    lease.release();
    await talk('d');
    await settled(ctx);
    expect(loadedKeys(ctx)).not.toContain('agent:alpha:a');
  });

  it('keeps count of the loaded entries as sessions load, grow, evict and unload, counting all only over the budget', async () => {
    // 6 entries a session at most: past 6 sessions the bound no longer fits the budget of 40.
    const { ctx, talk } = setup(40, { maxActiveEntries: 4, maxRamTombstones: 2 });
    const recountAll = vi.spyOn(ctx.sessions, 'recountAll');
    const keys = Array.from({ length: 10 }, (_, index) => `k${index}`);
    for (const key of keys) await talk(key);
    // Three more turns of one session: its oldest entries are evicted and its tombstones capped.
    for (let turn = 0; turn < 3; turn++) await talk('k0');
    await settled(ctx, keys);
    expect(ctx.sessions.size).toBe(10);
    expect(ctx.sessions.countedEntries).toBe(loadedEntries(ctx));
    expect(loadedEntries(ctx)).toBeLessThanOrEqual(40);
    // Under the budget no append summed every session.
    expect(recountAll).not.toHaveBeenCalled();

    const more = Array.from({ length: 12 }, (_, index) => `m${index}`);
    for (const key of more) await talk(key);
    await settled(ctx, [...keys, ...more]);
    expect(recountAll).toHaveBeenCalled();
    expect(loadedEntries(ctx)).toBeLessThanOrEqual(40);
    expect(ctx.sessions.countedEntries).toBe(loadedEntries(ctx));
    // The least recently active went first: the last sessions to talk are still loaded.
    expect(ctx.sessions.has(sessionRef('m11').sessionId)).toBe(true);
    expect(ctx.sessions.has(sessionRef('k1').sessionId)).toBe(false);
  });
});
