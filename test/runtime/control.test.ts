import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { LanguageModel, ModelRequest, ModelStreamEvent } from '../../src/model/index.js';
import { startRuntime, tempHome } from './helpers.js';

/** Plans four tasks, then lets every task's model call hang until it is aborted; counts task calls. */
function planningThenHangingModel() {
  const taskCalls: string[] = [];
  const model: LanguageModel = {
    specificationVersion: 'v1',
    provider: 'test',
    modelId: 'plan-then-hang',
    contextWindowTokens: 100_000,
    async *doStream(request: ModelRequest, options): AsyncIterable<ModelStreamEvent> {
      if (request.metadata?.purpose === 'plan') {
        const plan = {
          reply: 'Four steps.',
          tasks: ['one', 'two', 'three', 'four'].map((title) => ({ title, description: `do ${title}` })),
        };
        yield { type: 'text-delta', text: JSON.stringify(plan) };
        yield { type: 'finish', stopReason: 'end_turn' };
        return;
      }
      const task = String(request.messages.at(-1)?.content ?? '');
      taskCalls.push(task);
      await new Promise<void>((resolve) => {
        if (options.signal?.aborted) resolve();
        options.signal?.addEventListener('abort', () => resolve(), { once: true });
      });
      yield { type: 'error', error: { code: 'ABORTED', message: 'aborted', retryable: false } };
    },
  };
  return { model, taskCalls };
}

describe('agent.control over the gateway changes what runs', () => {
  it('saturates with QUEUE_FULL, then pause, resume and cancel act on the running tasks', async () => {
    const home = tempHome();
    writeFileSync(join(home, 'agentd.yaml'), 'workers:\n  concurrency: 1\n  admission_queue_size: 2\n');
    const { model, taskCalls } = planningThenHangingModel();
    const started = await startRuntime({ home, model });
    const client = await started.connect();
    const sessionKey = 'agent:main:ops';
    try {
      const progress: any[] = [];
      client.onEvent((event, payload) => {
        if (event === 'agent.progress') progress.push(payload);
      });
      await client.call('chat.history', { sessionKey, limit: 1 });
      const plan = await client.call<{
        tasks: Array<{ workItemId: string }>;
        rejected: Array<{ code: string }>;
      }>('agent.control', {
        action: 'goal',
        goal: 'do four things',
        sessionKey,
      });
      // One worker and two waiting places: the fourth task is refused, loudly.
      expect(plan.rejected.map((rejection) => rejection.code)).toContain('QUEUE_FULL');
      expect(plan.tasks.length).toBe(4 - plan.rejected.length);
      await expect.poll(() => progress.some((entry) => entry.phase === 'saturated')).toBe(true);

      await expect.poll(() => taskCalls.length).toBe(1);
      const paused = await client.call<{ workItemIds: string[] }>('agent.control', {
        action: 'pause',
        sessionKey,
      });
      expect(paused.workItemIds.sort()).toEqual(plan.tasks.map((task) => task.workItemId).sort());
      const whilePaused = await client.call<{ counts: { paused: number; active: number } }>('agent.control', {
        action: 'state',
        sessionKey,
      });
      expect(whilePaused.counts).toMatchObject({ paused: plan.tasks.length, active: 0 });
      const callsWhilePaused = taskCalls.length;

      await client.call('agent.control', { action: 'resume', sessionKey });
      // The worker picks a task up again: the model is called once more.
      await expect.poll(() => taskCalls.length).toBe(callsWhilePaused + 1);

      const cancelled = await client.call<{ workItemIds: string[] }>('agent.control', {
        action: 'cancel',
        sessionKey,
      });
      expect(cancelled.workItemIds.length).toBe(plan.tasks.length);
      const items = await client.call<{ items: Array<{ state: string }> }>('work.list', { sessionKey });
      expect(items.items.every((item) => item.state === 'cancelled')).toBe(true);
      const callsAfterCancel = taskCalls.length;
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(taskCalls.length).toBe(callsAfterCancel);
    } finally {
      await client.close();
      await started.runtime.close();
    }
  });
});

describe('agent.control refuses what would size work or storage by the caller', () => {
  it('refuses an oversized session key, agent id or id list with INVALID_REQUEST, planning nothing', async () => {
    const { model } = planningThenHangingModel();
    const started = await startRuntime({ home: tempHome(), model });
    const client = await started.connect();
    try {
      const refused = (params: Record<string, unknown>) =>
        client.call('agent.control', params).then(
          () => undefined,
          (error: { code: string }) => error.code,
        );
      // Before, the 300 KB key was written into the planner-received event of the audit log.
      expect(
        await refused({ action: 'goal', goal: 'g', sessionKey: `agent:main:${'k'.repeat(300_000)}` }),
      ).toBe('INVALID_REQUEST');
      expect(await refused({ action: 'goal', goal: 'g', sessionKey: 'agent:main:x\u0007' })).toBe(
        'INVALID_REQUEST',
      );
      expect(
        await refused({ action: 'goal', goal: 'g', sessionKey: 'agent:main:x', agentId: 'a'.repeat(65) }),
      ).toBe('INVALID_REQUEST');
      const ids = Array.from({ length: 1_001 }, (_, index) => `work_${index}`);
      expect(await refused({ action: 'cancel', sessionKey: 'agent:main:x', ids })).toBe('INVALID_REQUEST');
      const { items } = await client.call<{ items: unknown[] }>('work.list', {});
      expect(items).toEqual([]);
    } finally {
      await client.close();
      await started.runtime.close();
    }
  });
});
