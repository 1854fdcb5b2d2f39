import { describe, expect, it } from 'vitest';
import type { LanguageModel, ModelRequest, ModelStreamEvent } from '../../src/model/index.js';
import { startRuntime, tempHome } from '../runtime/helpers.js';

/** Plans two tasks and does each at once; counts the planning calls. */
function countingPlanner() {
  const planCalls: string[] = [];
  const model: LanguageModel = {
    specificationVersion: 'v1',
    provider: 'test',
    modelId: 'counting-planner',
    contextWindowTokens: 100_000,
    async *doStream(request: ModelRequest): AsyncIterable<ModelStreamEvent> {
      if (request.metadata?.purpose === 'plan') {
        planCalls.push(String(request.metadata.goal));
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
        expect(await client.call<GoalAnswer>('agent.control', goal)).toEqual(answer);
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
        expect(await client.call<GoalAnswer>('agent.control', goal)).toEqual(answer);
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
