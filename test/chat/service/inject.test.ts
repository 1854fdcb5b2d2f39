import { describe, expect, it } from 'vitest';
import { injectNote } from '../../../src/chat/service/inject.js';
import { readEndedRuns } from '../../../src/chat/service/recovery.js';
import { type createManualClock, createRecentMap } from '../../../src/util/index.js';
import { fakeContext } from './context.js';

const note = (idempotencyKey?: string) => ({
  sessionKey: 's',
  agentId: 'main',
  role: 'assistant' as const,
  text: 'a note',
  ...(idempotencyKey ? { idempotencyKey } : {}),
});
const appends = (calls: unknown[][]) => calls.filter((call) => call[0] === 'memory.append').length;

describe('chat step: injected notes under an idempotency key', () => {
  it('writes a key once, keeps the key in the entry, and answers it again with that entry', async () => {
    const { ctx, calls } = fakeContext();
    const first = await injectNote(ctx, note('k'), 'a note');
    expect(await injectNote(ctx, note('k'), 'a note')).toEqual(first);
    expect(appends(calls)).toBe(1);
    expect(calls.find((call) => call[0] === 'memory.append')?.[2]).toMatchObject({
      metadata: { injected: true, idempotencyKey: 'k' },
    });
    await injectNote(ctx, note(), 'a note');
    await injectNote(ctx, note(), 'a note');
    expect(appends(calls)).toBe(3);
  });

  it('frees a key whose note the store refused, so it can be sent again', async () => {
    const { ctx, calls } = fakeContext({ appendFailures: 1 });
    await expect(injectNote(ctx, note('k'), 'a note')).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    await expect(injectNote(ctx, note('k'), 'a note')).resolves.toMatchObject({
      memoryId: expect.any(String),
    });
    expect(appends(calls)).toBe(2);
  });

  it('answers the keys of notes written before a restart, for the window only, and keeps the newest at the bound', async () => {
    const mark = (key: string, memoryId: number, createdAtMs: number) => ({
      address: `s#${memoryId}`,
      sessionKey: 's',
      agentId: 'main',
      role: 'system' as const,
      createdAtMs,
      metadata: { injected: true, idempotencyKey: key },
    });
    const { ctx, calls } = fakeContext({
      marks: [mark('new', 3, 990), mark('mid', 2, 980), mark('old', 1, 970)],
    });
    const bounded = {
      ...ctx,
      maxEndedRunsRead: 2,
      injectedKeys: createRecentMap<Promise<string>>({ windowMs: 600_000, maxEntries: 2, clock: ctx.clock }),
    };
    await readEndedRuns(bounded);
    expect(['old', 'mid', 'new'].map((key) => bounded.injectedKeys.has(key))).toEqual([false, true, true]);
    expect(await injectNote(bounded, note('new'), 'a note')).toEqual({ memoryId: 's#3' });
    expect(appends(calls)).toBe(0);
    // `mid` was written at 980 and the window is 600,000 ms: now is 1,000.
    (ctx.clock as ReturnType<typeof createManualClock>).advance(599_980);
    await injectNote(bounded, note('mid'), 'a note');
    expect(appends(calls)).toBe(1);
  });
});
