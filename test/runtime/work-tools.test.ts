import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import type { LanguageModel, ModelRequest, ModelStreamEvent } from '../../src/model/index.js';
import { defineTool } from '../../src/tools/index.js';
import { startRuntime } from './helpers.js';

/** Answers at once and records the tools each request offered. */
function recordingModel(): LanguageModel & { offered: string[][] } {
  const offered: string[][] = [];
  return {
    specificationVersion: 'v1',
    provider: 'scripted',
    modelId: 'recording',
    contextWindowTokens: 100_000,
    offered,
    async *doStream(request: ModelRequest): AsyncIterable<ModelStreamEvent> {
      offered.push((request.tools ?? []).map((tool) => tool.name));
      yield { type: 'text-delta', text: 'Done.' };
      yield { type: 'finish', stopReason: 'end_turn' };
    },
  };
}

describe('work item runs: their tools', () => {
  it('offers every run the same tools, and a tool registered later to the runs after it', async () => {
    const model = recordingModel();
    const started = await startRuntime({ model });
    const client = await started.connect();
    const runItem = async (title: string) => {
      const { id } = await client.call<{ id: string }>('work.submit', {
        kind: 'task',
        title,
        description: title,
      });
      await vi.waitFor(
        async () => {
          const { item } = await client.call<{ item: { state: string } }>('work.get', { id });
          expect(item.state).toBe('completed');
        },
        { timeout: 15_000, interval: 25 },
      );
      return model.offered.at(-1)!;
    };
    try {
      const first = await runItem('first');
      expect(first).toEqual(expect.arrayContaining(['report_blocked']));
      expect(await runItem('second')).toEqual(first);
      started.runtime.tools.register(
        defineTool({
          name: 'late_tool',
          description: 'Registered after the first runs.',
          input: z.object({}),
          execute: async () => 'ok',
        }),
      );
      const third = await runItem('third');
      expect(third).toContain('late_tool');
      expect(third.filter((name) => name !== 'late_tool').sort()).toEqual([...first].sort());
    } finally {
      await client.close();
      await started.runtime.close();
    }
  });
});
