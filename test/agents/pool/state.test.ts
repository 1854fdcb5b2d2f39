import { describe, expect, it } from 'vitest';
import { checkIdle, classFor, createPoolState, errorPayload } from '../../../src/agents/pool/state.js';
import type { WorkQueue } from '../../../src/work/index.js';

const queue = { config: { leaseMs: 30_000 } } as WorkQueue;
const runItem = async () => undefined;

describe('worker pool state', () => {
  it('refuses class options that cannot work', () => {
    expect(() =>
      createPoolState({
        queue,
        runItem,
        classes: {
          a: { concurrency: 1, admissionQueueSize: 1 },
          b: { concurrency: 1, admissionQueueSize: 1 },
        },
      }),
    ).toThrow('at most one worker class may omit `kinds`');
    expect(() =>
      createPoolState({ queue, runItem, classes: { a: { concurrency: 0, admissionQueueSize: 1 } } }),
    ).toThrow('concurrency must be a positive integer');
    expect(() =>
      createPoolState({ queue, runItem, classes: { a: { concurrency: 1, admissionQueueSize: -1 } } }),
    ).toThrow('admissionQueueSize must be a non-negative integer');
  });

  it('defaults to one chat class, a heartbeat at a third of the lease, and three claim loops', () => {
    const pool = createPoolState({ queue, runItem });
    expect(pool.classes.map((state) => [state.name, state.options])).toEqual([
      ['chat', { concurrency: 2, admissionQueueSize: 16 }],
    ]);
    expect(pool.heartbeatIntervalMs).toBe(10_000);
    expect(pool.claimLoops).toBe(3);
    expect(pool.workerId).toMatch(/^worker/);
  });

  it('routes kinds to their class and the rest to the default class', () => {
    const pool = createPoolState({
      queue,
      runItem,
      classes: {
        chat: { concurrency: 2, admissionQueueSize: 4 },
        background: { concurrency: 1, admissionQueueSize: 4, kinds: ['memory.maintain'] },
      },
    });
    expect(classFor(pool, 'memory.maintain')?.name).toBe('background');
    expect(classFor(pool, 'task')?.name).toBe('chat');
    expect(pool.listedKinds).toEqual(['memory.maintain']);
    const only = createPoolState({
      queue,
      runItem,
      classes: { bg: { concurrency: 1, admissionQueueSize: 1, kinds: ['x'] } },
    });
    expect(classFor(only, 'task')).toBeUndefined();
  });

  it('resolves idle waiters only when nothing runs, waits or is reserved', () => {
    const pool = createPoolState({ queue, runItem });
    let idle = 0;
    pool.idleWaiters.push(() => idle++);
    pool.classes[0]!.reserved = 1;
    checkIdle(pool);
    expect(idle).toBe(0);
    pool.classes[0]!.reserved = 0;
    checkIdle(pool);
    expect(idle).toBe(1);
    expect(pool.idleWaiters).toEqual([]);
  });

  it('turns any error into a bounded failure payload', () => {
    const payload = errorPayload(new Error('x'.repeat(5_000)));
    expect(payload.message).toHaveLength(2_000);
    expect(payload).toMatchObject({ retryable: false });
  });
});
