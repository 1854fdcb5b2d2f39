import { describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../../src/util/index.js';
import { createPersister } from '../../../src/workflow/engine/persistence.js';
import { createRunState, newTaskRecord, rootSpec } from '../../../src/workflow/engine/run-state.js';
import type { WorkflowRecordStore, WorkflowRecordWriter } from '../../../src/workflow/index.js';

const run = () =>
  createRunState(newTaskRecord('wf', 0, { taskId: 'r', rootTaskId: 'r', spec: rootSpec('r', 'x') }), 'start');

/** A record store whose batches note how many writes they held; writes say which writer they got. */
function fakeStore(options: { failBatch?: boolean } = {}) {
  const batches: number[] = [];
  const log: Array<{ name: string; batched: boolean }> = [];
  const batchWriter = {} as WorkflowRecordWriter;
  const store = {
    async batch(work: (writer: WorkflowRecordWriter) => Promise<void>) {
      const before = log.length;
      await work(batchWriter);
      batches.push(log.length - before);
      if (options.failBatch) throw new Error('rolled back');
    },
  } as unknown as WorkflowRecordStore;
  const write =
    (name: string, fail = false) =>
    async (writer: WorkflowRecordWriter) => {
      if (fail && writer !== batchWriter) throw new Error('disk full');
      log.push({ name, batched: writer === batchWriter });
    };
  return { store, batches, log, write };
}

describe('persistence', () => {
  it('gathers the writes of one event-loop turn into one batch, in order, and later ones into the next', async () => {
    const { store, batches, log, write } = fakeStore();
    const persist = createPersister(store, silentLogger);
    const target = run();
    persist(target, write('a'));
    persist(target, write('b'));
    persist(target, write('c'));
    expect(log).toEqual([]);
    await target.persistQueue;
    expect(log.map((entry) => entry.name)).toEqual(['a', 'b', 'c']);
    expect(batches).toEqual([3]);
    persist(target, write('d'));
    await target.persistQueue;
    expect(log.map((entry) => entry.name)).toEqual(['a', 'b', 'c', 'd']);
    expect(batches).toEqual([3, 1]);
    expect(target.unwritten).toBeUndefined();
  });

  it('retries a failed batch write by write, logs and counts on the run what still fails, and goes on', async () => {
    const { store, log, write } = fakeStore({ failBatch: true });
    const error = vi.fn();
    const persist = createPersister(store, { ...silentLogger, error });
    const target = run();
    persist(target, write('first'));
    persist(target, write('broken', true));
    persist(target, write('third'));
    persist(target, write('broken again', true));
    await target.persistQueue;
    expect(log.filter((entry) => !entry.batched).map((entry) => entry.name)).toEqual(['first', 'third']);
    expect(error).toHaveBeenCalledTimes(2);
    expect(target.unwritten).toEqual({ count: 2, error: new Error('disk full') });
  });

  it('does nothing without a record store', async () => {
    const persist = createPersister(undefined, silentLogger);
    const target = run();
    const before = target.persistQueue;
    const write = vi.fn(async () => {});
    persist(target, write);
    expect(target.persistQueue).toBe(before);
    expect(write).not.toHaveBeenCalled();
  });
});

describe('persistence under fake timers', () => {
  it('still lands the writes when a test fakes setImmediate', async () => {
    vi.useFakeTimers({ toFake: ['setImmediate', 'setTimeout'] });
    try {
      const { store, batches, write } = fakeStore();
      const persist = createPersister(store, silentLogger);
      const target = run();
      persist(target, write('a'));
      await target.persistQueue;
      expect(batches).toEqual([1]);
    } finally {
      vi.useRealTimers();
    }
  });
});
