import { afterEach, describe, expect, it } from 'vitest';
import { createPlanner, createWorkerPool, type WorkerPool } from '../../src/agents/index.js';
import { type Bus, createBus } from '../../src/bus/index.js';
import { createSqliteDatabase, migrate, type SqlDatabase } from '../../src/store/index.js';
import { createScriptedModel, type ScriptedReply } from '../../src/testing.js';
import { createWorkQueue, type WorkQueue } from '../../src/work/index.js';
import { describeEachDatabase, temporarySqliteFile } from '../helpers/databases.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';
import { answerOf, keyedGoal, planReply } from './helpers.js';

const { sessionKey } = keyedGoal;
const request = keyedGoal;

describeEachDatabase('a goal sent again with its idempotency key', (getDb) => {
  let queue: WorkQueue | undefined;
  afterEach(async () => {
    await queue?.close();
    queue = undefined;
  });
  const setup = (steps: ScriptedReply[]) => {
    const bus = createBus();
    queue = createWorkQueue({ db: getDb(), bus });
    const model = createScriptedModel({ steps });
    return { bus, queue, model, planner: createPlanner({ model, queue, bus }) };
  };
  const itemsOf = (queue: WorkQueue) => queue.list({ sessionKey, limit: 1_000 });

  it('after the first was answered: the same plan, with no model call and no work item of its own', async () => {
    const { queue, model, planner } = setup([planReply()]);
    const first = await planner.plan(request);
    const items = await itemsOf(queue);
    expect(items).toHaveLength(3);

    const again = await planner.plan({ ...request, goal: `  ${request.goal}\n` });
    expect(first.replayed).toBeUndefined();
    expect(again.replayed).toBe(true);
    expect(answerOf(again)).toEqual(answerOf(first));
    expect(model.requests).toHaveLength(1);
    expect(model.unexpectedCalls).toEqual([]);
    expect((await itemsOf(queue)).map((item) => item.id).sort()).toEqual(items.map((item) => item.id).sort());
  });

  it('while the first is being planned: waits for it and answers the same', async () => {
    const { queue, model, planner } = setup([planReply({ delayMs: 50 })]);
    const [first, second] = await Promise.all([planner.plan(request), planner.plan(request)]);
    expect(second.planId).toBe(first.planId);
    expect(answerOf(second)).toEqual(answerOf(first));
    expect(model.requests).toHaveLength(1);
    expect(await itemsOf(queue)).toHaveLength(3);
  });

  it('with another goal: CONFLICT, whether the first is being planned or was answered', async () => {
    const { queue, model, planner } = setup([planReply({ delayMs: 50 })]);
    const first = planner.plan(request);
    await expect(planner.plan({ ...request, goal: 'something else' })).rejects.toMatchObject({
      code: 'CONFLICT',
    });
    await first;
    await expect(planner.plan({ ...request, goal: 'something else' })).rejects.toMatchObject({
      code: 'CONFLICT',
    });
    expect(model.requests).toHaveLength(1);
    expect(await itemsOf(queue)).toHaveLength(3);
  });

  it('is scoped to the session: the same key in another session is another goal', async () => {
    const { model, planner } = setup([planReply(), planReply()]);
    const first = await planner.plan(request);
    const other = await planner.plan({ ...request, sessionKey: 'agent:main:other' });
    expect(other.planId).not.toBe(first.planId);
    expect(model.requests).toHaveLength(2);
  });

  it('a planner that starts afresh on the same database answers from the stored tasks, or CONFLICT', async () => {
    const { bus, queue, planner } = setup([planReply()]);
    const first = await planner.plan(request);

    const model = createScriptedModel({ steps: [] });
    const restarted = createPlanner({ model, queue, bus });
    await expect(restarted.plan({ ...request, goal: 'something else' })).rejects.toMatchObject({
      code: 'CONFLICT',
    });
    const again = await restarted.plan(request);
    expect(answerOf(again)).toEqual(answerOf(first));
    expect(model.requests).toHaveLength(0);
    expect(await itemsOf(queue)).toHaveLength(3);

    for (const task of first.tasks) await queue.cancel(task.workItemId);
    expect((await again.finished).text).toContain('0 of 3 task(s) completed.');
  });

  it('a key forgotten from memory is found through its tasks', async () => {
    const { bus, queue } = setup([]);
    const model = createScriptedModel({ steps: [planReply(), planReply()] });
    const planner = createPlanner({ model, queue, bus, maxRememberedKeys: 1 });
    const first = await planner.plan(request);
    await planner.plan({ ...request, idempotencyKey: 'k-2' });
    expect(answerOf(await planner.plan(request))).toEqual(answerOf(first));
    expect(model.requests).toHaveLength(2);
  });

  it('after a failure: planned afresh, since the failed plan left nothing that runs', async () => {
    const { queue, model, planner } = setup([
      { error: { code: 'PROVIDER_AUTH', message: 'bad key', retryable: false } },
      planReply(),
    ]);
    await expect(planner.plan(request)).rejects.toMatchObject({ code: 'PROVIDER_AUTH' });
    const retried = await planner.plan(request);
    expect(retried.tasks).toHaveLength(3);
    expect(model.requests).toHaveLength(2);
    expect(await itemsOf(queue)).toHaveLength(3);
  });
});

describeEachDatabase('a keyed goal whose tasks a full disk refused', (getDb) => {
  let queue: WorkQueue | undefined;
  afterEach(async () => {
    await queue?.close();
    queue = undefined;
  });

  it('is planned afresh when sent again, also by a planner that starts afresh, and then answered', async () => {
    const db = createFaultyDatabase(getDb());
    const bus = createBus();
    const faultyQueue = createWorkQueue({ db, bus });
    queue = faultyQueue;
    const model = createScriptedModel({ steps: [planReply(), planReply()] });
    // The refusal passes as soon as the planner met it: the failed plan's task is cancelled at once.
    const planner = createPlanner({
      model,
      queue: faultyQueue,
      bus,
      submitTask: async (submission) => {
        try {
          return await faultyQueue.submit(submission);
        } finally {
          if (db.refused > 0) db.heal();
        }
      },
    });
    const filling = bus.on('work:submitted', () => db.failWrites());
    await expect(planner.plan(request)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    filling();
    const failed = await faultyQueue.list({ sessionKey });
    expect(failed.map((item) => item.state)).toEqual(['cancelled']);

    // A process that did not see the failure finds only the failed plan's task: it plans again.
    const retried = await createPlanner({ model, queue: faultyQueue, bus }).plan(request);
    expect(model.requests).toHaveLength(2);
    expect(retried.tasks).toHaveLength(3);
    expect(retried.tasks.map((task) => task.workItemId)).not.toContain(failed[0]!.id);
    expect((await createPlanner({ model, queue: faultyQueue, bus }).plan(request)).planId).toBe(
      retried.planId,
    );
    expect(model.requests).toHaveLength(2);
  });
});

describe('a keyed goal after a restart on the same SQLite file', () => {
  let file: ReturnType<typeof temporarySqliteFile> | undefined;
  const open: Array<{ db: SqlDatabase; queue: WorkQueue; pool?: WorkerPool }> = [];
  afterEach(async () => {
    for (const { db, queue, pool } of open.splice(0)) {
      await pool?.stop();
      await queue.close();
      await db.close();
    }
    file?.remove();
    file = undefined;
  });
  const start = async (path: string, bus: Bus) => {
    const db = createSqliteDatabase({ path });
    await migrate(db);
    const queue = createWorkQueue({ db, bus });
    // Never started, and one waiting place: the plan's second and third tasks are refused.
    const pool = createWorkerPool({
      queue,
      bus,
      admissionQueueSize: 1,
      runItem: async () => ({ summary: 'ok' }),
    });
    open.push({ db, queue, pool });
    return { db, queue, pool };
  };

  it('is answered from the stored tasks, refusals included, with no model call', async () => {
    file = temporarySqliteFile('agentd-planner-key-');
    const before = await start(file.path, createBus());
    const bus = createBus();
    const planner = createPlanner({
      model: createScriptedModel({ steps: [planReply()] }),
      queue: before.queue,
      bus,
      submitTask: before.pool.submit,
    });
    const first = await planner.plan(request);
    expect(first.tasks.map((task) => task.title)).toEqual(['build']);
    expect(first.rejected.map((task) => task.title)).toEqual(['test', 'publish']);
    await before.pool.stop();
    await before.queue.close();
    await before.db.close();
    open.splice(0);

    const after = await start(file.path, bus);
    const model = createScriptedModel({ steps: [] });
    const restarted = createPlanner({ model, queue: after.queue, bus, submitTask: after.pool.submit });
    const again = await restarted.plan(request);
    expect(model.requests).toHaveLength(0);
    expect(again.planId).toBe(first.planId);
    expect(again.reply).toBe(first.reply);
    expect(again.tasks).toEqual(first.tasks);
    expect(again.rejected.map(({ title, code }) => ({ title, code }))).toEqual(
      first.rejected.map(({ title, code }) => ({ title, code })),
    );
    expect(await after.queue.list({ sessionKey })).toHaveLength(1);
  });
});
