import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createWorkerPool, type RunItem, type WorkerPool } from '../../src/agents/index.js';
import { type Bus, type BusEvent, createBus } from '../../src/bus/index.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { ProviderError, UserInputError } from '../../src/util/index.js';
import { createWorkQueue, type WorkItem, type WorkQueue } from '../../src/work/index.js';
import { openTestDatabase } from '../helpers/databases.js';
import { countEvents, deferred, nextEvent } from '../agents/helpers.js';

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

describe('repro', () => {
  it.each(Array.from({ length: 150 }, (_, i) => i))('repro %i', async () => {
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

});
