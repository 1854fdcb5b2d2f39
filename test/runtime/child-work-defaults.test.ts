import { describe, expect, it, vi } from 'vitest';
import type { LanguageModel, ModelStreamEvent } from '../../src/model/index.js';
import { startRuntime } from './helpers.js';

/** A model that follows spawn_child_work's description literally: a description and nothing else. */
function delegatingModel(): LanguageModel {
  return {
    specificationVersion: 'v1',
    provider: 'scripted',
    modelId: 'delegating',
    contextWindowTokens: 100_000,
    async *doStream(request): AsyncIterable<ModelStreamEvent> {
      const task = request.messages.find((message) => message.role === 'user')!.content;
      const answered = request.messages.some((message) => message.role === 'tool');
      if (task.startsWith('Task: Plan the launch') && !answered) {
        yield {
          type: 'tool-call',
          toolCall: { id: 'c1', name: 'spawn_child_work', arguments: { description: 'Book the venue.' } },
        };
        yield { type: 'finish', stopReason: 'tool_calls' };
        return;
      }
      yield { type: 'text-delta', text: answered ? 'Delegated.' : 'Venue booked.' };
      yield { type: 'finish', stopReason: 'end_turn' };
    },
  };
}

describe('spawn_child_work as its description says (through the gateway)', () => {
  it('a call with only a description spawns a task for the same agent', async () => {
    const started = await startRuntime({ model: delegatingModel() });
    const client = await started.connect();
    try {
      const { id } = await client.call<{ id: string }>('work.submit', {
        kind: 'task',
        agentId: 'main',
        title: 'Plan the launch',
        description: 'Plan it.',
      });
      let children: any[] = [];
      await vi.waitFor(
        async () => {
          children = (await client.call<{ items: any[] }>('work.list', { parentId: id })).items;
          expect(children.map((child) => child.state)).toEqual(['completed']);
        },
        { timeout: 15_000, interval: 50 },
      );
      expect(children[0]).toMatchObject({ kind: 'task', agentId: 'main', parentId: id });
      expect(children[0].outcome.data.summary).toBe('Venue booked.');
      const parent = await client.call<{ item: any }>('work.get', { id });
      expect(parent.item.state).toBe('completed');
    } finally {
      await client.close();
      await started.runtime.close();
    }
  }, 60_000);
});
