import { describe, expect, it, vi } from 'vitest';
import type { LanguageModel, ModelRequest, ModelStreamEvent } from '../../src/model/index.js';
import { startRuntime } from './helpers.js';

/** Records a finding, closes the step, then answers; each request is kept. */
function stepModel(): LanguageModel & { requests: ModelRequest[] } {
  const requests: ModelRequest[] = [];
  const call = (id: string, entryType: string, content: string): ModelStreamEvent => ({
    type: 'tool-call',
    toolCall: { id, name: 'ledger_append', arguments: { entry_type: entryType, content } },
  });
  return {
    specificationVersion: 'v1',
    provider: 'scripted',
    modelId: 'steps',
    contextWindowTokens: 100_000,
    requests,
    async *doStream(request): AsyncIterable<ModelStreamEvent> {
      requests.push(request);
      const turn = request.messages.filter((message) => message.role === 'assistant').length;
      const summarized = request.messages.some((message) => message.content.startsWith('[completed step'));
      if (turn === 0 && !summarized) {
        yield call('c1', 'finding', 'Vendor B has no public API.');
        yield call('c2', 'decision', 'Compare A and C only.');
        yield { type: 'finish', stopReason: 'tool_calls' };
      } else if (!summarized) {
        yield call('c3', 'step', 'Surveyed the vendors.');
        yield { type: 'finish', stopReason: 'tool_calls' };
      } else {
        yield { type: 'text-delta', text: 'Compared A and C.' };
        yield { type: 'finish', stopReason: 'end_turn' };
      }
    },
  };
}

describe('closed blocks keep what was learned (through the gateway)', () => {
  it("a work item's run sees the closed block's summary with its findings and decisions, not the transcript", async () => {
    const model = stepModel();
    const started = await startRuntime({ model });
    const client = await started.connect();
    try {
      const { id } = await client.call<{ id: string }>('work.submit', {
        kind: 'task',
        title: 'Compare vendors',
        description: 'Compare the vendors.',
      });
      await vi.waitFor(
        async () => {
          const got = await client.call<{ item: { state: string } }>('work.get', { id });
          expect(got.item.state).toBe('completed');
        },
        { timeout: 15_000, interval: 50 },
      );
      // The last request of this item's run (the runtime's own memory upkeep may call the model too).
      const last = model.requests
        .filter((request) =>
          request.messages.some((message) => message.content.startsWith('Task: Compare vendors')),
        )
        .at(-1)!.messages;
      expect(last.some((message) => message.role === 'tool')).toBe(false);
      expect(last.at(-1)).toEqual({
        role: 'user',
        content: [
          '[completed step 3: Surveyed the vendors.]',
          'Learned in this step:',
          '  finding #1: Vendor B has no public API.',
          '  decision #2: Compare A and C only.',
        ].join('\n'),
      });
    } finally {
      await client.close();
      await started.runtime.close();
    }
  }, 60_000);
});
