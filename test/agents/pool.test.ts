import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createWorkerPool, type RunItem, type WorkerPool } from '../../src/agents/index.js';
import { type Bus, type BusEvent, createBus } from '../../src/bus/index.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { ErrorCodes, ProviderError, SystemError, UserInputError } from '../../src/util/index.js';
import { createWorkQueue, type WorkItem, type WorkQueue } from '../../src/work/index.js';
import { openTestDatabase } from '../helpers/databases.js';
import { countEvents, deferred, nextEvent } from './helpers.js';

let db: SqlDatabase;
let bus: Bus;
let queue: WorkQueue;
let pool: WorkerPool | undefined;

beforeEach(async () => {
  db = await openTestDatabase('sqlite');
  bus = createBus();
  queue = createWorkQueue({ db, bus, config: { backoffBaseMs: 0 } });
});
afterEach(async () => {
  await pool?.stop();
  pool = undefined;
  await queue.close();
  await db.close();
});

/** A runItem whose items wait until the test releases them, recording the peak concurrency. */
function gatedRunner() {
  const gates = new Map<string, ReturnType<typeof deferred<unknown>>>();
  const started: string[] = [];
  const signals = new Map<string, AbortSignal>();
  let active = 0;
  let peak = 0;
  const startWaiters: Array<() => void> = [];
  const runItem: RunItem = async (item, { signal }) => {
    active++;
    peak = Math.max(peak, active);
    started.push(item.description);
    signals.set(item.description, signal);
    const gate = deferred<unknown>();
    gates.set(item.description, gate);
    if (signal.aborted) gate.reject(signal.reason);
    signal.addEventListener('abort', () => gate.reject(signal.reason), { once: true });
    for (const wake of startWaiters.splice(0)) wake();
    try {
      return await gate.promise;
    } finally {
      active--;
    }
  };
  /** Resolves once runItem has been called `times` times for `description`. */
  const waitStarted = async (description: string, times = 1) => {
    while (started.filter((entry) => entry === description).length < times) {
      await new Promise<void>((resolve) => startWaiters.push(resolve));
    }
  };
  return {
    runItem,
    started,
    waitStarted,
    signals,
    peak: () => peak,
    release: (description: string, value: unknown = { summary: `${description} done` }) =>
      gates.get(description)!.resolve(value),
  };
}

describe('worker pool', () => {
  it('runs items with bounded concurrency and completes them all', async () => {
    const gated = gatedRunner();
    pool = createWorkerPool({ queue, bus, runItem: gated.runItem, concurrency: 2, admissionQueueSize: 10 });
    for (const name of ['a', 'b', 'c', 'd', 'e']) await pool.submit({ kind: 'task', description: name });
    pool.start();
    await gated.waitStarted('a');
    await gated.waitStarted('b');
    expect(gated.started).toEqual(['a', 'b']);
    expect((await pool.snapshot()).counts).toMatchObject({ queued: 3, active: 2 });
    const allDone = countEvents(bus, 'work:completed', 5);
    for (const name of ['a', 'b', 'c', 'd', 'e']) {
      await gated.waitStarted(name);
      gated.release(name);
    }
    const done = await allDone;
    expect(done.map((event) => event.data.summary).sort()).toEqual([
      'a done',
      'b done',
      'c done',
      'd done',
      'e done',
    ]);
    expect(gated.peak()).toBe(2);
  });

  it('rejects with QUEUE_FULL and a saturation event when the admission queue is full', async () => {
    pool = createWorkerPool({ queue, bus, runItem: async () => ({}), concurrency: 1, admissionQueueSize: 3 });
    const saturated: BusEvent[] = [];
    bus.on('agent:progress', (event) => {
      if (event.data.phase === 'saturated') saturated.push(event);
    });
    // Not started: nothing drains the admission queue. Five submissions race; exactly three get in.
    const results = await Promise.allSettled(
      [1, 2, 3, 4, 5].map((n) => pool!.submit({ kind: 'task', description: `t${n}`, sessionKey: 's1' })),
    );
    expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(3);
    const rejected = results.filter(
      (result): result is PromiseRejectedResult => result.status === 'rejected',
    );
    expect(rejected).toHaveLength(2);
    expect(rejected[0]!.reason).toMatchObject({ code: 'QUEUE_FULL', retryable: true });
    expect(saturated).toHaveLength(2);
    expect(saturated[0]!.data).toMatchObject({
      phase: 'saturated',
      queueDepth: 3,
      limit: 3,
      sessionKey: 's1',
    });
    // Refused tasks were never written.
    expect((await queue.counts()).queued).toBe(3);
    // Once the pool drains the queue, submissions are admitted again.
    pool.start();
    await pool.idle();
    await expect(pool.submit({ kind: 'task', description: 'later' })).resolves.toMatchObject({
      merged: false,
    });
  });

  it('pool-level pause stops claiming; resume starts again', async () => {
    const gated = gatedRunner();
    pool = createWorkerPool({ queue, bus, runItem: gated.runItem, concurrency: 2, admissionQueueSize: 10 });
    await pool.pause();
    pool.start();
    await pool.submit({ kind: 'task', description: 'a' });
    expect((await pool.snapshot()).paused).toBe(true);
    expect(gated.started).toEqual([]);
    await pool.resume();
    await gated.waitStarted('a');
    expect(gated.started).toEqual(['a']);
    gated.release('a');
    await pool.idle();
  });

  it('pausing a session pauses its queued tasks and aborts its running ones; resume runs them again', async () => {
    const gated = gatedRunner();
    pool = createWorkerPool({ queue, bus, runItem: gated.runItem, concurrency: 1, admissionQueueSize: 10 });
    const first = await pool.submit({ kind: 'task', description: 's1-a', sessionKey: 's1' });
    await pool.submit({ kind: 'task', description: 's1-b', sessionKey: 's1' });
    pool.start();
    await gated.waitStarted('s1-a');
    const paused = await pool.pause({ sessionKey: 's1' });
    expect(paused).toHaveLength(2);
    expect(gated.signals.get('s1-a')?.aborted).toBe(true);
    await pool.idle();
    expect((await queue.get(first.id))?.state).toBe('paused');
    expect((await pool.snapshot({ sessionKey: 's1' })).counts).toMatchObject({
      paused: 2,
      active: 0,
      queued: 0,
    });
    // Another session's work still runs while s1 is paused.
    await pool.submit({ kind: 'task', description: 's2-a', sessionKey: 's2' });
    await gated.waitStarted('s2-a');
    expect(gated.started).toEqual(['s1-a', 's2-a']);
    gated.release('s2-a');
    await pool.idle();

    const bothDone = countEvents(bus, 'work:completed', 2);
    expect(await pool.resume({ sessionKey: 's1' })).toHaveLength(2);
    await gated.waitStarted('s1-a', 2);
    gated.release('s1-a');
    await gated.waitStarted('s1-b');
    gated.release('s1-b');
    await bothDone;
    expect((await queue.get(first.id))?.state).toBe('completed');
  });

  it('cancel aborts running work through its signal and cancels queued work before it starts', async () => {
    const gated = gatedRunner();
    pool = createWorkerPool({ queue, bus, runItem: gated.runItem, concurrency: 1, admissionQueueSize: 10 });
    const running = await pool.submit({ kind: 'task', description: 'a', sessionKey: 's' });
    const waiting = await pool.submit({ kind: 'task', description: 'b', sessionKey: 's' });
    pool.start();
    await gated.waitStarted('a');
    const cancelled = await pool.cancel({ sessionKey: 's' });
    expect(cancelled.sort()).toEqual([running.id, waiting.id].sort());
    expect(gated.signals.get('a')?.aborted).toBe(true);
    await pool.idle();
    expect(gated.started).toEqual(['a']);
    expect((await queue.getMany([running.id, waiting.id])).map((item) => item.state)).toEqual([
      'cancelled',
      'cancelled',
    ]);
  });

  it('a cancel from outside the pool (CLI, gateway) also aborts the running item', async () => {
    const gated = gatedRunner();
    pool = createWorkerPool({ queue, bus, runItem: gated.runItem, concurrency: 1, admissionQueueSize: 10 });
    const { id } = await queue.submit({ kind: 'task', description: 'a' });
    pool.start();
    await gated.waitStarted('a');
    await queue.cancel(id);
    expect(gated.signals.get('a')?.aborted).toBe(true);
    await pool.idle();
  });

  it('retries retryable failures and records non-retryable ones as failed', async () => {
    let calls = 0;
    const runItem: RunItem = async (item) => {
      calls++;
      if (item.description === 'flaky' && calls < 2)
        throw new ProviderError({ code: 'PROVIDER_TIMEOUT', message: 'slow', retryable: true });
      if (item.description === 'broken')
        throw new UserInputError({ code: 'INVALID_REQUEST', message: 'bad input' });
      return { summary: 'fine' };
    };
    pool = createWorkerPool({ queue, bus, runItem, concurrency: 1, admissionQueueSize: 10 });
    const flaky = await pool.submit({ kind: 'task', description: 'flaky' });
    const completed = nextEvent(bus, 'work:completed', (data) => data.workItemId === flaky.id);
    pool.start();
    await completed;
    expect((await queue.get(flaky.id))?.attempts).toBe(2);
    const broken = await pool.submit({ kind: 'task', description: 'broken' });
    const failed = nextEvent(bus, 'work:failed', (data) => data.workItemId === broken.id);
    expect((await failed).data).toMatchObject({ willRetry: false, error: { code: 'INVALID_REQUEST' } });
    expect((await queue.get(broken.id))?.state).toBe('failed');
  });

  it('gives the memory manager its own class so it never takes a chat slot', async () => {
    const gated = gatedRunner();
    const memoryRuns: WorkItem[] = [];
    pool = createWorkerPool({
      queue,
      bus,
      runItem: gated.runItem,
      classes: {
        chat: { concurrency: 1, admissionQueueSize: 10 },
        background: {
          concurrency: 1,
          admissionQueueSize: 1,
          kinds: ['memory.maintain'],
          runItem: async (item) => {
            memoryRuns.push(item);
            return { summary: 'memory tidied' };
          },
        },
      },
    });
    await pool.submit({ kind: 'task', description: 'long chat task' });
    pool.start();
    await gated.waitStarted('long chat task');
    // The chat slot is taken, yet memory maintenance runs at once in its own class.
    const memoryDone = nextEvent(bus, 'work:completed');
    await pool.submit({ kind: 'memory.maintain', description: 'tick', dedupKey: 'memory' });
    expect((await memoryDone).data.summary).toBe('memory tidied');
    expect(memoryRuns).toHaveLength(1);
    // And memory work never runs in the chat class: a second chat task waits for the chat slot.
    await pool.submit({ kind: 'task', description: 'second chat task' });
    const snapshot = await pool.snapshot();
    expect(snapshot.classes.chat).toMatchObject({ concurrency: 1, active: 1 });
    expect(snapshot.classes.background).toMatchObject({ concurrency: 1, active: 0 });
    gated.release('long chat task');
    await gated.waitStarted('second chat task');
    gated.release('second chat task');
    await pool.idle();
  });

  it('items finishing together share one completion statement, and each keeps its own outcome', async () => {
    const gated = gatedRunner();
    const statements: string[][] = [];
    const firstStatement = deferred();
    // The first completion waits here until the others have finished running, so they queue up behind it.
    // Built on the queue as prototype so its `wakeSequence` getter stays live.
    const observed: WorkQueue = Object.assign(Object.create(queue) as WorkQueue, {
      completeMany: async (...[workerId, completions]: Parameters<WorkQueue['completeMany']>) => {
        statements.push(completions.map((completion) => completion.id));
        if (statements.length === 1) await firstStatement.promise;
        return queue.completeMany(workerId, completions);
      },
    });
    pool = createWorkerPool({
      queue: observed,
      bus,
      runItem: gated.runItem,
      concurrency: 4,
      admissionQueueSize: 10,
    });
    const ids: Record<string, string> = {};
    for (const name of ['a', 'b', 'c', 'd'])
      ids[name] = (await pool.submit({ kind: 'task', description: name })).id;
    pool.start();
    for (const name of ['a', 'b', 'c', 'd']) await gated.waitStarted(name);
    gated.release('a');
    // Between a runner's return and its completion only promise callbacks run; the statement leaves at the
    // end of that event-loop turn (the test's first wait was queued before the pool's, hence two).
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(statements).toEqual([[ids.a]]);
    for (const name of ['b', 'c', 'd']) gated.release(name);
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(statements).toEqual([[ids.a]]);
    // An item cancelled while its completion waits is not completed, and the others are not held up by it.
    await queue.cancel(ids.c!);
    firstStatement.resolve();
    await pool.idle();
    expect(statements).toEqual([[ids.a], [ids.b, ids.c, ids.d]]);
    const items = await queue.getMany([ids.a!, ids.b!, ids.c!, ids.d!]);
    expect(items.map((item) => [item.description, item.state, item.outcome?.data])).toEqual([
      ['a', 'completed', { summary: 'a done' }],
      ['b', 'completed', { summary: 'b done' }],
      ['c', 'cancelled', undefined],
      ['d', 'completed', { summary: 'd done' }],
    ]);
  });

  it('reports the end of an item again while the store is unavailable, without running the item twice', async () => {
    let refusals = 2;
    const unavailable = () =>
      new SystemError({
        code: ErrorCodes.storeUnavailable,
        message: 'connection terminated',
        retryable: true,
      });
    const flaky: WorkQueue = Object.assign(Object.create(queue) as WorkQueue, {
      completeMany: async (...args: Parameters<WorkQueue['completeMany']>) => {
        if (refusals-- > 0) throw unavailable();
        return queue.completeMany(...args);
      },
      fail: async (...args: Parameters<WorkQueue['fail']>) => {
        if (refusals-- > 0) throw unavailable();
        return queue.fail(...args);
      },
    });
    const runs = new Map<string, number>();
    pool = createWorkerPool({
      queue: flaky,
      bus,
      runItem: async (item) => {
        runs.set(item.description, (runs.get(item.description) ?? 0) + 1);
        if (item.description === 'broken')
          throw new UserInputError({ code: 'BAD_INPUT', message: 'no', retryable: false });
        return { ok: true };
      },
      concurrency: 1,
    });
    const done = await pool.submit({ kind: 'task', description: 'done' });
    pool.start();
    await expect.poll(async () => (await queue.get(done.id))?.state, { timeout: 5_000 }).toBe('completed');
    // The failure report meets the store unavailable too, and is kept all the same.
    refusals = 1;
    const broken = await pool.submit({ kind: 'task', description: 'broken' });
    await expect.poll(async () => (await queue.get(broken.id))?.state, { timeout: 5_000 }).toBe('failed');
    expect(Object.fromEntries(runs)).toEqual({ done: 1, broken: 1 });
  });

  it('stop hands running items back to the queue without spending an attempt', async () => {
    const gated = gatedRunner();
    pool = createWorkerPool({ queue, bus, runItem: gated.runItem, concurrency: 1, admissionQueueSize: 10 });
    const { id } = await pool.submit({ kind: 'task', description: 'a' });
    pool.start();
    await gated.waitStarted('a');
    await pool.stop();
    pool = undefined;
    expect(await queue.get(id)).toMatchObject({ state: 'queued', attempts: 0 });
  });
});
