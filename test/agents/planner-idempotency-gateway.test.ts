import { afterAll, describe, expect, it } from 'vitest';
import type { LanguageModel, ModelRequest, ModelStreamEvent } from '../../src/model/index.js';
import { createScratchPostgresDatabase } from '../helpers/databases.js';
import { startRuntime, tempHome } from '../runtime/helpers.js';

/** Plans two tasks (after `planDelayMs`) and does each at once; counts the planning calls. */
function countingPlanner(planDelayMs = 0) {
  const planCalls: string[] = [];
  const model: LanguageModel = {
    specificationVersion: 'v1',
    provider: 'test',
    modelId: 'counting-planner',
    contextWindowTokens: 100_000,
    async *doStream(request: ModelRequest): AsyncIterable<ModelStreamEvent> {
      if (request.metadata?.purpose === 'plan') {
        planCalls.push(String(request.metadata.goal));
        if (planDelayMs > 0) await new Promise((resume) => setTimeout(resume, planDelayMs));
        const plan = {
          reply: 'Two steps.',
          tasks: ['one', 'two'].map((title) => ({ title, description: `do ${title}` })),
        };
        yield { type: 'text-delta', text: JSON.stringify(plan) };
      } else {
        yield { type: 'text-delta', text: 'done' };
      }
      yield { type: 'finish', stopReason: 'end_turn' };
    },
  };
  return { model, planCalls };
}

interface GoalAnswer {
  planId: string;
  reply: string;
  tasks: Array<{ workItemId: string; title: string }>;
  rejected: unknown[];
}

const sessionKey = 'agent:main:keyed';
const goal = { action: 'goal', goal: 'do two things', sessionKey, idempotencyKey: 'retry-me' };

describe('agent.control goal with an idempotency key', () => {
  it('answers the same key with the same plan, across a restart, and another goal under it with CONFLICT', async () => {
    const home = tempHome();
    const { model, planCalls } = countingPlanner();
    const first = await startRuntime({ home, model });
    let answer: GoalAnswer;
    try {
      const client = await first.connect();
      try {
        answer = await client.call<GoalAnswer>('agent.control', goal);
        expect(answer.tasks).toHaveLength(2);
        expect(await client.call<GoalAnswer>('agent.control', goal)).toEqual({ ...answer, replayed: true });
        const { items } = await client.call<{ items: unknown[] }>('work.list', { sessionKey });
        expect(items).toHaveLength(2);
        await expect(
          client.call('agent.control', { ...goal, goal: 'do three things' }),
        ).rejects.toMatchObject({
          code: 'CONFLICT',
        });
      } finally {
        await client.close();
      }
    } finally {
      await first.runtime.close();
    }

    const second = await startRuntime({ home, model });
    try {
      const client = await second.connect();
      try {
        expect(await client.call<GoalAnswer>('agent.control', goal)).toEqual({ ...answer, replayed: true });
        const { items } = await client.call<{ items: unknown[] }>('work.list', { sessionKey });
        expect(items).toHaveLength(2);
      } finally {
        await client.close();
      }
    } finally {
      await second.runtime.close();
    }
    expect(planCalls).toEqual(['do two things']);
  });

  it('refuses a key that is too long or has control characters with INVALID_REQUEST, planning nothing', async () => {
    const { model, planCalls } = countingPlanner();
    const started = await startRuntime({ home: tempHome(), model });
    const client = await started.connect();
    try {
      const refused = (idempotencyKey: unknown) =>
        client.call('agent.control', { ...goal, idempotencyKey }).then(
          () => undefined,
          (error: { code: string; message: string }) => error,
        );
      for (const key of ['k'.repeat(257), 'line\nbreak', '', 42]) {
        expect(await refused(key)).toMatchObject({
          code: 'INVALID_REQUEST',
          message: expect.stringContaining('idempotencyKey'),
        });
      }
      expect(await refused('k'.repeat(256))).toBeUndefined();
      expect(planCalls).toEqual(['do two things']);
    } finally {
      await client.close();
      await started.runtime.close();
    }
  });
});

describe('a keyed goal retried on another agentd of the same database while the first plans it', () => {
  const drops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const drop of drops) await drop();
  });

  /** Two runtimes (two servers, or a server and the in-process CLI) planning with one slow model. */
  async function retriedElsewhere(homes: [string, string], env: NodeJS.ProcessEnv) {
    const { model, planCalls } = countingPlanner(400);
    const first = await startRuntime({ home: homes[0], model, env });
    const second = await startRuntime({ home: homes[1], model, env });
    const clients = [await first.connect(), await second.connect()];
    try {
      const planning = clients[0]!.call<GoalAnswer>('agent.control', goal, { timeoutMs: 10_000 });
      // The client gave up on the first and retried on the other while the model still plans.
      await new Promise((resume) => setTimeout(resume, 150));
      const retried = await clients[1]!.call<GoalAnswer>('agent.control', goal, { timeoutMs: 10_000 });
      expect(retried).toEqual({ ...(await planning), replayed: true });
      expect(planCalls).toEqual(['do two things']);
      const { items } = await clients[1]!.call<{ items: unknown[] }>('work.list', { sessionKey });
      expect(items).toHaveLength(2);
    } finally {
      for (const client of clients) await client.close();
      await first.runtime.close();
      await second.runtime.close();
    }
  }

  it('on one SQLite file: the retry waits and answers the same plan, planned once', async () => {
    const home = tempHome();
    await retriedElsewhere([home, home], {});
  });

  it('on one Postgres database: the same', async () => {
    const database = await createScratchPostgresDatabase('agentd_goal_claims');
    drops.push(() => database.drop());
    await retriedElsewhere([tempHome(), tempHome()], { DATABASE_URL: database.url });
  });
});
