import { afterEach, expect, it } from 'vitest';
import {
  createPlanner,
  createWorkerPool,
  type PlanMemoryWrite,
  type WorkerPool,
} from '../../src/agents/index.js';
import { createBus } from '../../src/bus/index.js';
import { createLocalModel } from '../../src/model/index.js';
import { createManualClock } from '../../src/util/index.js';
import { createWorkQueue, isTerminalWorkState, type WorkQueue } from '../../src/work/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createFaultyDatabase, type FaultyDatabase } from '../helpers/faulty-database.js';

describeEachDatabase('planner on a full disk', (getDb) => {
  let queue: WorkQueue | undefined;
  let pool: WorkerPool | undefined;
  afterEach(async () => {
    await pool?.stop();
    await queue?.close();
    pool = undefined;
    queue = undefined;
  });

  const setup = () => {
    const db = createFaultyDatabase(getDb());
    const clock = createManualClock(Date.now());
    const bus = createBus({ clock });
    queue = createWorkQueue({ db, bus, clock });
    // Not started: what the planner leaves stays where it is.
    pool = createWorkerPool({ queue, bus, admissionQueueSize: 10, runItem: async () => ({ summary: 'ok' }) });
    const memory: PlanMemoryWrite[] = [];
    const planner = createPlanner({
      model: createLocalModel(),
      queue,
      bus,
      clock,
      submitTask: pool.submit,
      memoryWriter: async (write) => memory.push(write),
    });
    return { db, clock, bus, queue, pool, planner, memory };
  };
  const request = { goal: 'one; two; three', sessionKey: 'agent:main:s', agentId: 'main' };
  const itemsOf = (queue: WorkQueue) => queue.list({ sessionKey: request.sessionKey, order: 'oldest' });
  const liveIds = async (queue: WorkQueue) =>
    (await itemsOf(queue))
      .filter((item) => !isTerminalWorkState(item.state))
      .map((item) => item.id)
      .sort();

  /** Heals the disk as soon as the refused write has reached the planner, as a passing refusal does. */
  const healingAfterRefusal = (db: FaultyDatabase, queue: WorkQueue) => ({
    submitTask: async (submission: Parameters<WorkQueue['submit']>[0]) => {
      try {
        return await queue.submit(submission);
      } finally {
        if (db.refused > 0) db.heal();
      }
    },
  });

  it('a goal whose second task the disk refuses fails with STORE_UNAVAILABLE; after heal the same goal leaves exactly its tasks', async () => {
    const { db, bus, queue, planner, memory } = setup();
    const filling = bus.on('work:submitted', () => db.failWrites());
    await expect(planner.plan(request)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', retryable: true });
    filling();
    // The cancel of the task already written was refused by the same full disk; nothing runs it meanwhile.
    expect((await itemsOf(queue)).map((item) => item.state)).toEqual(['paused']);
    db.heal();

    const result = await planner.plan(request);
    expect(result.tasks.map((task) => task.title)).toEqual(['One', 'Two', 'Three']);
    expect(await liveIds(queue)).toEqual(result.tasks.map((task) => task.workItemId).sort());
    expect((await itemsOf(queue)).filter((item) => item.state === 'paused')).toEqual([]);
    expect(memory).toHaveLength(1);
  });

  it('a refusal that passes leaves no task of the failed goal behind', async () => {
    const { db, bus, queue } = setup();
    const planner = createPlanner({
      model: createLocalModel(),
      queue,
      bus,
      ...healingAfterRefusal(db, queue),
    });
    const filling = bus.on('work:submitted', () => db.failWrites());
    await expect(planner.plan(request)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    filling();
    expect(db.refused).toBe(1);
    expect((await itemsOf(queue)).map((item) => item.state)).toEqual(['cancelled']);
  });

  it('a goal whose release the disk refuses is cancelled whole and leaves no memory note', async () => {
    const { db, bus, queue, planner, memory } = setup();
    const filling = bus.on('work:resumed', () => db.failWrites());
    await expect(planner.plan(request)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    filling();
    const failed = (await itemsOf(queue)).map((item) => item.id);
    expect(failed).toHaveLength(3);
    expect(memory).toEqual([]);
    db.heal();

    const result = await planner.plan({ ...request, goal: 'four' });
    expect(await liveIds(queue)).toEqual(result.tasks.map((task) => task.workItemId).sort());
    expect((await queue.getMany(failed)).map((item) => item.state)).toEqual([
      'cancelled',
      'cancelled',
      'cancelled',
    ]);
  });

  it('a later goal cancels the held tasks of a planning that died with its process, once they are old', async () => {
    const { clock, bus, queue, planner } = setup();
    // The first process dies while writing its second task.
    const dying = createPlanner({
      model: createLocalModel(),
      queue,
      bus,
      submitTask: (submission) =>
        submission.params?.index === 0 ? queue.submit(submission) : new Promise(() => undefined),
    });
    void dying.plan(request);
    await expect.poll(async () => (await itemsOf(queue)).length).toBe(1);
    const [held] = await itemsOf(queue);

    // Young, it may be another process's planning under way.
    await planner.plan({ ...request, goal: 'four' });
    expect((await queue.get(held!.id))?.state).toBe('paused');
    clock.advance(11 * 60_000);
    await planner.plan({ ...request, goal: 'five' });
    expect((await queue.get(held!.id))?.state).toBe('cancelled');
  });
});
