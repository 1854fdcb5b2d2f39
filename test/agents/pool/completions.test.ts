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
  it('completions of one event-loop turn share a statement; those finishing meanwhile share the next, each with its own result', async () => {
    const { queue, calls, open } = fakeQueue();
    const pool = createPoolState({ queue, runItem: async () => undefined });
    const first = complete(pool, { id: 'a' });
    const second = complete(pool, { id: 'b' });
    const third = complete(pool, { id: 'bad' });
    // Nothing leaves before the end of the turn, which the others of the turn join.
    expect(calls).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls).toEqual([['a', 'b', 'bad']]);
    const fourth = complete(pool, { id: 'c' });
    await new Promise((resolve) => setImmediate(resolve));
    const fifth = complete(pool, { id: 'd' });
    await new Promise((resolve) => setImmediate(resolve));
    // Still one statement: the two wait for the one on its way.
    expect(calls).toEqual([['a', 'b', 'bad']]);
    open();
    await expect(first).resolves.toMatchObject({ id: 'a' });
    await expect(second).resolves.toMatchObject({ id: 'b' });
    await expect(third).rejects.toThrow('lease lost');
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls).toEqual([
      ['a', 'b', 'bad'],
      ['c', 'd'],
    ]);
    open();
    await expect(fourth).resolves.toMatchObject({ id: 'c' });
    await expect(fifth).resolves.toMatchObject({ id: 'd' });
    expect(pool.completing).toBe(false);
  });

  it('the items a returning statement lets start and finish go together, not the first alone', async () => {
    const { queue, calls, open } = fakeQueue();
    const pool = createPoolState({ queue, runItem: async () => undefined });
    const first = complete(pool, { id: 'a' });
    await new Promise((resolve) => setImmediate(resolve));
    // As under claim-ahead: the statement's result starts the next items, which finish one after another in
    // the promise callbacks that follow it.
    const next = first.then(async () => {
      const x = complete(pool, { id: 'x' });
      await Promise.resolve();
      const y = complete(pool, { id: 'y' });
      await Promise.resolve();
      const z = complete(pool, { id: 'z' });
      return [x, y, z];
    });
    open();
    const completions = await next;
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls).toEqual([['a'], ['x', 'y', 'z']]);
    open();
    await expect(Promise.all(completions)).resolves.toHaveLength(3);
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
