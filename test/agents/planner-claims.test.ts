import { afterEach, expect, it } from 'vitest';
import { createPlanner, createSqlGoalClaims, type GoalClaims } from '../../src/agents/index.js';
import { createBus } from '../../src/bus/index.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { createScriptedModel, type ScriptedReply } from '../../src/testing.js';
import { createWorkQueue, type WorkQueue } from '../../src/work/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { answerOf, keyedGoal, planReply } from './helpers.js';

/**
 * Two processes on one database, each with its own planner, queue and bus (what `agentd serve` on two
 * machines sharing Postgres, or a server and the in-process `agentd goal`, are): a keyed goal retried on the
 * second while the first still plans it. Before goal claims the second found no plan yet and planned the
 * goal again, so its tasks ran twice.
 */

const { sessionKey } = keyedGoal;
const request = keyedGoal;

const queues: WorkQueue[] = [];
const claimSets: GoalClaims[] = [];
afterEach(async () => {
  await Promise.all(claimSets.splice(0).map((claims) => claims.close()));
  await Promise.all(queues.splice(0).map((queue) => queue.close()));
});

async function claimRows(db: SqlDatabase) {
  return db.all<{ idempotency_key: string; goal: string; owner_id: string; held_until: number }>(
    'SELECT idempotency_key, goal, owner_id, held_until FROM goal_claims ORDER BY idempotency_key',
  );
}

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resume) => setTimeout(resume, 5));
  }
}

describeEachDatabase('a keyed goal across processes of one database', (getDb) => {
  /** One process's planner: its own bus, queue and claims, on the shared database. */
  const processWith = (steps: ScriptedReply[], claimOptions: { leaseMs?: number } = {}) => {
    const db = getDb();
    const bus = createBus();
    const queue = createWorkQueue({ db, bus });
    queues.push(queue);
    const claims = createSqlGoalClaims({ db, ...claimOptions });
    claimSets.push(claims);
    const model = createScriptedModel({ steps });
    return { queue, model, claims, planner: createPlanner({ model, queue, bus, claims, claimPollMs: 10 }) };
  };

  it('a retry on another process while the first plans waits for it and answers its plan', async () => {
    const first = processWith([planReply({ delayMs: 300 })]);
    const second = processWith([]);
    const planning = first.planner.plan(request);
    await until('the first to claim the key', async () => (await claimRows(getDb())).length === 1);

    const retried = await second.planner.plan(request);
    const answered = await planning;
    expect(retried.planId).toBe(answered.planId);
    expect(answerOf(retried)).toEqual(answerOf(answered));
    expect(second.model.requests).toHaveLength(0);
    expect(second.model.unexpectedCalls).toEqual([]);
    expect(await first.queue.list({ sessionKey, limit: 100 })).toHaveLength(3);
    // The claim ends with the planning: the key is then answered from the stored tasks.
    expect(await claimRows(getDb())).toEqual([]);
  });

  it('another goal under a key being planned elsewhere is CONFLICT at once, while the first still plans', async () => {
    const first = processWith([planReply({ delayMs: 1_000 })]);
    const second = processWith([]);
    let firstAnswered = false;
    const planning = first.planner.plan(request).finally(() => {
      firstAnswered = true;
    });
    await until('the first to claim the key', async () => (await claimRows(getDb())).length === 1);
    await expect(second.planner.plan({ ...request, goal: 'something else' })).rejects.toMatchObject({
      code: 'CONFLICT',
    });
    expect(firstAnswered).toBe(false);
    await planning;
  });

  it('waits while a live claim holds the key, and plans once it is released with no plan (a failure)', async () => {
    const db = getDb();
    await db.run(
      'INSERT INTO goal_claims (session_key, idempotency_key, goal, owner_id, held_until) VALUES (?, ?, ?, ?, ?)',
      [sessionKey, request.idempotencyKey, request.goal, 'gco_elsewhere', Date.now() + 60_000],
    );
    const retry = processWith([planReply()]);
    let settled = false;
    const answer = retry.planner.plan(request).finally(() => {
      settled = true;
    });
    await new Promise((resume) => setTimeout(resume, 200));
    expect(settled).toBe(false);
    expect(retry.model.requests).toHaveLength(0);

    await db.run('DELETE FROM goal_claims WHERE owner_id = ?', ['gco_elsewhere']);
    expect((await answer).tasks).toHaveLength(3);
    expect(retry.model.requests).toHaveLength(1);
  });

  it('takes over the claim of a process that died while planning, once its lease lapsed', async () => {
    const db = getDb();
    await db.run(
      'INSERT INTO goal_claims (session_key, idempotency_key, goal, owner_id, held_until) VALUES (?, ?, ?, ?, ?)',
      [sessionKey, request.idempotencyKey, request.goal, 'gco_dead', Date.now() - 1],
    );
    const retry = processWith([planReply()]);
    expect((await retry.planner.plan(request)).tasks).toHaveLength(3);
    expect(await claimRows(db)).toEqual([]);
  });

  it('renews its claim while the model thinks longer than a lease, and deletes claims long lapsed', async () => {
    const db = getDb();
    await db.run(
      'INSERT INTO goal_claims (session_key, idempotency_key, goal, owner_id, held_until) VALUES (?, ?, ?, ?, ?)',
      [sessionKey, 'forgotten', 'an old goal', 'gco_gone', Date.now() - 24 * 60 * 60 * 1000],
    );
    const first = processWith([planReply({ delayMs: 400 })], { leaseMs: 90 });
    const planning = first.planner.plan(request);
    await until('the first to claim the key', async () => (await claimRows(db)).length === 1);
    // The claim lapsed a day ago went when this one was taken.
    const [claimed, ...others] = await claimRows(db);
    expect(others).toEqual([]);
    expect(claimed).toMatchObject({ idempotency_key: request.idempotencyKey, goal: request.goal });
    await until(
      'the claim to be renewed',
      async () => Number((await claimRows(db))[0]?.held_until) > Number(claimed!.held_until),
    );
    // Still held past its first lease: a retry elsewhere waits rather than taking it over.
    const second = processWith([]);
    const retried = await second.planner.plan(request);
    expect(retried.planId).toBe((await planning).planId);
    expect(second.model.requests).toHaveLength(0);
  });
});
