import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  createPlanner,
  createWorkerPool,
  type PlanMemoryWrite,
  synthesize,
  type WorkerPool,
} from '../../src/agents/index.js';
import { type Bus, type BusEvent, createBus } from '../../src/bus/index.js';
import { createLocalModel, offlineWorkNotice } from '../../src/model/index.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { createScriptedModel } from '../../src/testing.js';
import { createWorkQueue, type WorkQueue } from '../../src/work/index.js';
import { openTestDatabase } from '../helpers/databases.js';

let db: SqlDatabase;
let bus: Bus;
let queue: WorkQueue;
let pool: WorkerPool | undefined;

beforeEach(async () => {
  db = await openTestDatabase('sqlite');
  bus = createBus();
  queue = createWorkQueue({ db, bus });
});
afterEach(async () => {
  await pool?.stop();
  pool = undefined;
  await queue.close();
  await db.close();
});

describe('planner', () => {
  it('turns a goal into a reply, work items and a memory write, then posts a synthesis when they finish', async () => {
    let active = 0;
    let peak = 0;
    pool = createWorkerPool({
      queue,
      bus,
      concurrency: 2,
      admissionQueueSize: 10,
      runItem: async (item) => {
        active++;
        peak = Math.max(peak, active);
        await new Promise((resolve) => setImmediate(resolve));
        active--;
        return { summary: `did "${item.title}"` };
      },
    });
    const memory: PlanMemoryWrite[] = [];
    const synthesized: string[] = [];
    const planner = createPlanner({
      model: createLocalModel(),
      queue,
      bus,
      submitTask: pool.submit,
      memoryWriter: async (write) => memory.push(write),
      onSynthesis: (synthesis) => synthesized.push(synthesis.text),
    });
    const events: BusEvent[] = [];
    bus.subscribe({ types: ['agent:*'] }, (event) => events.push(event));
    pool.start();

    const goal = 'Research the market; write a summary; email it to Bob';
    const result = await planner.plan({ goal, sessionKey: 's1', agentId: 'main' });
    expect(result.reply).toContain('3 task(s)');
    expect(result.tasks.map((task) => task.title)).toEqual([
      'Research the market',
      'Write a summary',
      'Email it to Bob',
    ]);
    expect(result.rejected).toEqual([]);
    const items = await queue.getMany(result.tasks.map((task) => task.workItemId));
    expect(
      items.every(
        (item) => item.sessionKey === 's1' && item.agentId === 'main' && item.params.planId === result.planId,
      ),
    ).toBe(true);
    expect(memory).toHaveLength(1);
    expect(memory[0]).toMatchObject({ sessionKey: 's1', role: 'system' });
    expect(memory[0]!.content).toMatch(/^Primary Brain plan for goal: Research the market/);

    const synthesis = await result.finished;
    expect(synthesis.tasks.map((task) => task.state)).toEqual(['completed', 'completed', 'completed']);
    expect(synthesis.text).toContain('✓ Write a summary: did "Write a summary"');
    expect(synthesis.text).toContain('All tasks completed.');
    expect(synthesized).toEqual([synthesis.text]);
    expect(peak).toBeLessThanOrEqual(2);

    const types = events.map((event) =>
      event.type === 'agent:progress' ? `progress:${(event.data as any).phase}` : event.type,
    );
    expect(types[0]).toBe('progress:planner-received');
    expect(types.indexOf('agent:plan')).toBeLessThan(types.indexOf('progress:planner-ready'));
    expect(types.at(-2)).toBe('progress:synthesis');
    expect(types.at(-1)).toBe('agent:synthesis');
    for (const task of result.tasks) {
      const statuses = events
        .filter(
          (event) => event.type === 'agent:status' && (event.data as any).workItemId === task.workItemId,
        )
        .map((event) => (event.data as any).state);
      expect(statuses).toEqual(['queued', 'running', 'completed']);
    }
    const completedStatus = events.find(
      (event) => event.type === 'agent:status' && (event.data as any).state === 'completed',
    );
    expect((completedStatus!.data as any).summary).toMatch(/^did "/);
  });

  it('reports tasks the saturated workers refused and still synthesizes the admitted ones', async () => {
    pool = createWorkerPool({
      queue,
      bus,
      concurrency: 1,
      admissionQueueSize: 1,
      runItem: async () => ({ summary: 'ok' }),
    });
    const planner = createPlanner({ model: createLocalModel(), queue, bus, submitTask: pool.submit });
    const result = await planner.plan({ goal: 'one; two; three', sessionKey: 's', agentId: 'main' });
    expect(result.tasks).toHaveLength(1);
    expect(result.rejected.map((task) => task.code)).toEqual(['QUEUE_FULL', 'QUEUE_FULL']);
    expect(result.reply).toContain('2 task(s) were refused');
    pool.start();
    expect((await result.finished).tasks).toHaveLength(1);
  });

  it('plans an unreadable model reply as a single task, and surfaces a model error', async () => {
    const model = createScriptedModel({
      steps: [
        { text: 'Sure, I will just do it.' },
        { error: { code: 'PROVIDER_AUTH', message: 'bad key', retryable: false } },
      ],
    });
    const planner = createPlanner({ model, queue, bus });
    const result = await planner.plan({ goal: 'tidy the docs', sessionKey: 's', agentId: 'main' });
    expect(result.reply).toBe('Sure, I will just do it.');
    expect(result.tasks.map((task) => task.description)).toEqual(['tidy the docs']);
    await expect(planner.plan({ goal: 'again', sessionKey: 's', agentId: 'main' })).rejects.toMatchObject({
      code: 'PROVIDER_AUTH',
      retryable: false,
    });
    expect(model.requests[0]!.metadata).toMatchObject({ purpose: 'plan', goal: 'tidy the docs' });
    expect(model.requests[0]!.responseFormat?.type).toBe('json');
  });

  it('remembers the latest plan of the most recent sessions only, however many keys callers choose', async () => {
    const planner = createPlanner({ model: createLocalModel(), queue, bus, maxRememberedPlans: 2 });
    for (const sessionKey of ['s1', 's2', 's1', 's3'])
      await planner.plan({ goal: `goal of ${sessionKey}`, sessionKey, agentId: 'main' });
    // s1 planned again after s2, so s2 is the oldest and the one forgotten.
    expect(await planner.latest('s2')).toBeUndefined();
    expect((await planner.latest('s1'))?.goal).toBe('goal of s1');
    expect((await planner.latest('s3'))?.goal).toBe('goal of s3');
  });

  it('a cancelled task ends the plan with a partial synthesis', async () => {
    const planner = createPlanner({ model: createLocalModel(), queue, bus });
    const result = await planner.plan({ goal: 'alpha; beta', sessionKey: 's', agentId: 'main' });
    await queue.cancel(result.tasks[0]!.workItemId);
    await queue.cancel(result.tasks[1]!.workItemId);
    const synthesis = await result.finished;
    expect(synthesis.text).toContain('0 of 2 task(s) completed.');
  });
});

describe('synthesis of offline results', () => {
  it('marks tasks the offline model only acknowledged and never claims all were done', () => {
    const text = synthesize('ship it', [
      { workItemId: 'w1', title: 'Build', state: 'completed', summary: 'Built v2.' },
      {
        workItemId: 'w2',
        title: 'Test',
        state: 'completed',
        summary: `[local model] Not done: the offline model cannot carry out "Test". ${offlineWorkNotice}`,
      },
    ]);
    expect(text.split('\n')).toEqual([
      'Results for "ship it":',
      '✓ Build: Built v2.',
      '○ Test: [local model] Not done: the offline model cannot carry out "Test".',
      `[local model] 1 of 2 task(s) were only acknowledged by the offline model (○); 1 was done for real. ${offlineWorkNotice}`,
    ]);
    expect(text).not.toContain('All tasks completed');
  });
});
