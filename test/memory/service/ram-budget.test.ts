import { expect, it } from 'vitest';
import { createBus } from '../../../src/bus/index.js';
import { createMemoryContext, type MemoryContext } from '../../../src/memory/service/context.js';
import { appendBatch, pinEntries, withSession } from '../../../src/memory/service/ram.js';
import { createManualClock, createSequentialIdGenerator } from '../../../src/util/index.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { sessionRef } from '../memory-fixtures.js';

describeEachDatabase('memory RAM context: the loaded-entries budget', (getDb) => {
  const setup = (maxLoadedEntries: number) => {
    const clock = createManualClock();
    const ctx = createMemoryContext({
      db: getDb(),
      bus: createBus(),
      clock,
      idGenerator: createSequentialIdGenerator(),
      config: { maxLoadedEntries },
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
  const settled = (ctx: MemoryContext) =>
    Promise.all(['a', 'b', 'c', 'd'].map((key) => ctx.mutex.run(sessionRef(key).sessionId, async () => {})));
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
});
