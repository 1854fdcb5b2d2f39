import { describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../../src/util/index.js';
import { createPersister } from '../../../src/workflow/engine/persistence.js';
import { createRunState, newTaskRecord, rootSpec } from '../../../src/workflow/engine/run-state.js';
import type { WorkflowRecordStore } from '../../../src/workflow/index.js';

const run = () =>
  createRunState(newTaskRecord('wf', 0, { taskId: 'r', rootTaskId: 'r', spec: rootSpec('r', 'x') }), 'start');

describe('persistence', () => {
  it('lands writes in order, one after another, and goes on past a failed one', async () => {
    const order: string[] = [];
    const error = vi.fn();
    const persist = createPersister({} as WorkflowRecordStore, { ...silentLogger, error });
    const target = run();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    persist(target, async () => {
      await gate;
      order.push('first');
    });
    persist(target, async () => {
      throw new Error('disk full');
    });
    persist(target, async () => {
      order.push('third');
    });
    await Promise.resolve();
    expect(order).toEqual([]);
    release();
    await target.persistQueue;
    expect(order).toEqual(['first', 'third']);
    expect(error).toHaveBeenCalledOnce();
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
