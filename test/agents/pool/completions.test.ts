import { describe, expect, it } from 'vitest';
import { complete } from '../../../src/agents/pool/completions.js';
import { createPoolState } from '../../../src/agents/pool/state.js';
import type { WorkItem, WorkQueue } from '../../../src/work/index.js';

function fakeQueue() {
  const calls: string[][] = [];
  let release!: () => void;
  let gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const queue = {
    config: { leaseMs: 30_000 },
    async completeMany(_workerId: string, completions: Array<{ id: string }>) {
      calls.push(completions.map((completion) => completion.id));
      await gate;
      gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      return completions.map((completion) =>
        completion.id === 'bad'
          ? { status: 'rejected' as const, reason: new Error('lease lost') }
          : { status: 'fulfilled' as const, value: { id: completion.id } as WorkItem },
      );
    },
  } as unknown as WorkQueue;
  return { queue, calls, open: () => release() };
}

describe('worker pool batched completions', () => {
  it('sends one at once; those finishing meanwhile share the next statement, each with its own result', async () => {
    const { queue, calls, open } = fakeQueue();
    const pool = createPoolState({ queue, runItem: async () => undefined });
    const first = complete(pool, { id: 'a' });
    const second = complete(pool, { id: 'b' });
    const third = complete(pool, { id: 'bad' });
    expect(calls).toEqual([['a']]);
    open();
    await expect(first).resolves.toMatchObject({ id: 'a' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls).toEqual([['a'], ['b', 'bad']]);
    open();
    await expect(second).resolves.toMatchObject({ id: 'b' });
    await expect(third).rejects.toThrow('lease lost');
    expect(pool.completing).toBe(false);
  });

  it('a failed statement rejects every completion of its batch', async () => {
    const queue = {
      config: { leaseMs: 30_000 },
      completeMany: async () => Promise.reject(new Error('database gone')),
    } as unknown as WorkQueue;
    const pool = createPoolState({ queue, runItem: async () => undefined });
    await expect(complete(pool, { id: 'a' })).rejects.toThrow('database gone');
  });
});
