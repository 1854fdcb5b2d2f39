import { describe, expect, it } from 'vitest';
import type { JobHandle, ScheduledJob } from '../../src/workflow/index.js';
import { createFifoExecutor } from '../../src/workflow/scheduler.js';

/** A job that runs until the test settles it. */
function gatedJob(taskId: string, started: string[]) {
  let settle!: (result: 'completed' | 'failed') => void;
  const job: ScheduledJob = {
    taskId,
    run: () => {
      started.push(taskId);
      return new Promise((resolve) => {
        settle = resolve;
      });
    },
  };
  return { job, settle: (result: 'completed' | 'failed' = 'completed') => settle(result) };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('FIFO scheduler', () => {
  it('starts jobs in order, never more than max_concurrency at once', async () => {
    const started: string[] = [];
    const events: string[] = [];
    const executor = createFifoExecutor({
      maxConcurrency: 2,
      maxQueueSize: null,
      now: () => 0,
      listener: {
        queued: (taskId, depth) => events.push(`queued ${taskId} ${depth}`),
        dequeued: (taskId, _waited, depth) => events.push(`dequeued ${taskId} ${depth}`),
      },
    });
    const jobs = ['a', 'b', 'c', 'd'].map((id) => gatedJob(id, started));
    for (const { job } of jobs) executor.submit(job);
    expect(started).toEqual(['a', 'b']);
    expect([executor.running, executor.queueDepth]).toEqual([2, 2]);
    expect(executor.stateOf('c')).toBe('queued');
    jobs[1]!.settle('failed');
    await flush();
    expect(started).toEqual(['a', 'b', 'c']);
    expect(executor.stateOf('b')).toBe('failed');
    jobs[0]!.settle();
    jobs[2]!.settle();
    await flush();
    jobs[3]!.settle();
    await executor.drain();
    expect(executor.stateOf('d')).toBe('completed');
    expect(events.slice(0, 3)).toEqual(['queued a 1', 'dequeued a 0', 'queued b 1']);
  });

  it('reads the clock once for a job started as it is submitted, once per pump for queued ones', async () => {
    let clock = 0;
    const readings: string[] = [];
    const executor = createFifoExecutor({
      maxConcurrency: 1,
      maxQueueSize: null,
      now: () => ++clock,
      listener: {
        queued: (taskId, _depth, at) => readings.push(`queued ${taskId} at ${at}`),
        dequeued: (taskId, waited, _depth, at) =>
          readings.push(`dequeued ${taskId} at ${at} waited ${waited}`),
      },
    });
    const started: string[] = [];
    const first = gatedJob('first', started);
    executor.submit(first.job);
    executor.submit(gatedJob('second', started).job);
    first.settle();
    await flush();
    expect(readings).toEqual([
      'queued first at 1',
      'dequeued first at 1 waited 0',
      'queued second at 2',
      'dequeued second at 3 waited 1',
    ]);
  });

  it('rejects a job beyond max_queue_size at once with QUEUE_FULL, and never runs it', () => {
    const started: string[] = [];
    const rejected: string[] = [];
    const executor = createFifoExecutor({
      maxConcurrency: 1,
      maxQueueSize: 1,
      now: () => 0,
      listener: { rejected: (taskId) => rejected.push(taskId) },
    });
    executor.submit(gatedJob('running', started).job);
    executor.submit(gatedJob('waiting', started).job);
    expect(() => executor.submit(gatedJob('extra', started).job)).toThrow(
      expect.objectContaining({ code: 'QUEUE_FULL', retryable: true }),
    );
    expect(rejected).toEqual(['extra']);
    expect(executor.stateOf('extra')).toBeUndefined();
  });

  it('holds queued jobs while paused, withdraws one, and drains when nothing runs', async () => {
    const started: string[] = [];
    const executor = createFifoExecutor({ maxConcurrency: 1, maxQueueSize: null, now: () => 0 });
    executor.pause();
    const first = gatedJob('first', started);
    executor.submit(first.job);
    executor.submit(gatedJob('second', started).job);
    expect(started).toEqual([]);
    await executor.drain();
    expect(executor.withdraw('second')).toBe(true);
    expect(executor.withdraw('second')).toBe(false);
    executor.resume();
    expect(started).toEqual(['first']);
    const drained = executor.drain();
    first.settle();
    await drained;
    expect([executor.running, executor.queueDepth, executor.paused]).toEqual([0, 0, false]);
  });

  it('always knows queued and running jobs; the bound applies to finished ones, in finishing order', async () => {
    const executor = createFifoExecutor({
      maxConcurrency: 1,
      maxQueueSize: null,
      now: () => 0,
      maxRemembered: 1,
    });
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    executor.submit({
      taskId: 'slow',
      run: async () => {
        await held;
        return 'failed';
      },
    });
    for (const taskId of ['a', 'b', 'c']) executor.submit({ taskId, run: async () => 'completed' });
    expect(['slow', 'a', 'b', 'c'].map((taskId) => executor.stateOf(taskId))).toEqual([
      'running',
      'queued',
      'queued',
      'queued',
    ]);
    release();
    await executor.drain();
    expect(['slow', 'a', 'b', 'c'].map((taskId) => executor.stateOf(taskId))).toEqual([
      undefined,
      undefined,
      undefined,
      'completed',
    ]);
    // A finished id submitted again runs again, and its new end is what is remembered.
    executor.submit({ taskId: 'a', run: async () => 'failed' });
    expect(executor.stateOf('a')).toBe('running');
    await executor.drain();
    expect([executor.stateOf('a'), executor.stateOf('c')]).toEqual(['failed', undefined]);
  });

  it('remembers the states of a bounded number of jobs', async () => {
    const executor = createFifoExecutor({
      maxConcurrency: 4,
      maxQueueSize: null,
      now: () => 0,
      maxRemembered: 2,
    });
    for (const taskId of ['a', 'b', 'c']) executor.submit({ taskId, run: async () => 'completed' });
    await executor.drain();
    expect(['a', 'b', 'c'].map((taskId) => executor.stateOf(taskId))).toEqual([
      undefined,
      'completed',
      'completed',
    ]);
  });

  it('ends a job it started through the handle, once, before anything else runs; a throw from start fails it', () => {
    const executor = createFifoExecutor({ maxConcurrency: 1, maxQueueSize: null, now: () => 0 });
    const started: string[] = [];
    const handles: JobHandle[] = [];
    const job = (taskId: string, start?: ScheduledJob['start']): ScheduledJob => ({
      taskId,
      run: () => Promise.reject(new Error('run is not called when there is start')),
      start:
        start ??
        ((_at, handle) => {
          started.push(taskId);
          handles.push(handle);
        }),
    });
    executor.submit(job('a'));
    executor.submit(job('b'));
    expect(started).toEqual(['a']);
    handles[0]!.ended('completed');
    // At once: the next job started from within `ended`.
    expect(started).toEqual(['a', 'b']);
    expect([executor.stateOf('a'), executor.running]).toEqual(['completed', 1]);
    handles[0]!.ended('failed');
    expect([executor.stateOf('a'), executor.running]).toEqual(['completed', 1]);
    executor.submit(
      job('c', () => {
        throw new Error('boom');
      }),
    );
    handles[1]!.ended('completed');
    expect([executor.stateOf('c'), executor.running, executor.queueDepth]).toEqual(['failed', 0, 0]);
  });

  it('starts the next job from the same loop when one ends as it starts, not from a call within it', async () => {
    const executor = createFifoExecutor({ maxConcurrency: 1, maxQueueSize: null, now: () => 0 });
    executor.pause();
    const count = 50_000;
    let ended = 0;
    for (let index = 0; index < count; index++)
      executor.submit({
        taskId: `t${index}`,
        run: () => Promise.reject(new Error('not called')),
        start: (_at, handle) => {
          ended++;
          handle.ended('completed');
        },
      });
    // Each ending within its start would otherwise nest a call of the loop per job, deeper than the stack.
    executor.resume();
    expect(ended).toBe(count);
    expect([executor.running, executor.queueDepth, executor.stateOf(`t${count - 1}`)]).toEqual([
      0,
      0,
      'completed',
    ]);
    await executor.drain();
  });
});
