import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { createRunState } from '../../../src/engage/run-state.js';
import { prepareRun } from '../../../src/engage/setup.js';
import { recordToolResults, runToolBatch } from '../../../src/engage/tool-batch.js';
import { createToolRegistry, defineTool, type ToolDefinition } from '../../../src/tools/index.js';
import { deferred } from '../helpers.js';
import { stepOptions } from './helpers.js';

async function batchOf(
  tools: ToolDefinition[] | undefined,
  overrides: Parameters<typeof stepOptions>[1] = {},
) {
  const harness = stepOptions([], {
    ...(tools ? { tools: { registry: createToolRegistry(tools) } } : {}),
    ...overrides,
  });
  const state = createRunState(harness.options);
  const setup = await prepareRun(state);
  return { ...harness, state, setup };
}

const call = (id: string, name: string, args: Record<string, unknown> = {}) => ({
  id,
  name,
  arguments: args,
});

describe('engage tool batch', () => {
  it('runs at most maxParallelTools calls at once and returns results in call order', async () => {
    let running = 0;
    let most = 0;
    const gates = [deferred(), deferred(), deferred()];
    const slow = defineTool({
      name: 'slow',
      description: 'waits for its gate',
      input: z.object({ i: z.number() }),
      execute: async ({ i }) => {
        running++;
        most = Math.max(most, running);
        await gates[i]!.promise;
        running--;
        return `done ${i}`;
      },
    });
    const { state, setup, types } = await batchOf([slow], { limits: { maxParallelTools: 2 } });
    const pending = runToolBatch(
      state,
      setup,
      [call('a', 'slow', { i: 0 }), call('b', 'slow', { i: 1 }), call('c', 'slow', { i: 2 })],
      false,
    );
    await vi.waitFor(() => expect(running).toBe(2));
    // The third call waits for a slot: letting the second finish starts it.
    gates[1]!.resolve();
    await vi.waitFor(() => expect(types().filter((type) => type === 'run:tool-started')).toHaveLength(3));
    gates[2]!.resolve();
    gates[0]!.resolve();
    const { outcomes } = await pending;
    expect(outcomes.map((outcome) => outcome.content)).toEqual(['done 0', 'done 1', 'done 2']);
    expect(most).toBe(2);
    expect(types().filter((type) => type === 'run:tool-started')).toHaveLength(3);
  });

  it('runs nothing over budget or without tools, and answers each call with an error', async () => {
    const { state, setup } = await batchOf([]);
    const over = await runToolBatch(state, setup, [call('a', 'x')], true);
    expect(over.outcomes[0]).toMatchObject({
      isError: true,
      status: 'aborted',
      content: expect.stringContaining('budget'),
    });
    const bare = await batchOf(undefined);
    const none = await runToolBatch(bare.state, bare.setup, [call('a', 'x')], false);
    expect(none.outcomes[0]).toMatchObject({ isError: true, status: 'unknown_tool' });
    expect(bare.types()).toEqual([]);
  });

  it('a call still waiting for a slot when the run is aborted does not start', async () => {
    const gate = deferred();
    const controller = new AbortController();
    const blocking = defineTool({
      name: 'blocking',
      description: 'holds its slot',
      input: z.object({}),
      execute: async () => {
        await gate.promise;
        return 'finished';
      },
    });
    const { state, setup } = await batchOf([blocking], {
      limits: { maxParallelTools: 1 },
      signal: controller.signal,
    });
    const pending = runToolBatch(state, setup, [call('a', 'blocking'), call('b', 'blocking')], false);
    controller.abort();
    gate.resolve();
    const { outcomes } = await pending;
    expect(outcomes[1]).toMatchObject({
      status: 'aborted',
      content: 'The run was aborted before this tool call started.',
    });
  });

  it('records results in the transcript and the window; ledger steps and skills from nested calls count', async () => {
    const stepTool = defineTool({
      name: 'step',
      description: 'writes a ledger step',
      input: z.object({}),
      execute: async () => ({
        content: 'noted',
        metadata: {
          ledgerEntry: { workItemId: 'work_1', seq: 1, entryType: 'step', content: 'first step done' },
        },
      }),
    });
    const skillTool = defineTool({
      name: 'skill',
      description: 'activates a skill',
      input: z.object({}),
      execute: async () => ({
        content: 'active',
        metadata: { activatedSkill: { name: 'deploy', version: 1, body: 'steps' } },
      }),
    });
    const outer = defineTool({
      name: 'outer',
      description: 'calls skill from inside',
      input: z.object({}),
      execute: async (_args, context) => {
        const inner = await context.callTool!({ id: 'inner', name: 'skill', arguments: {} });
        return `outer saw ${inner.content}`;
      },
    });
    const { state, setup } = await batchOf([stepTool, skillTool, outer]);
    const assistant = {
      role: 'assistant' as const,
      content: '',
      toolCalls: [call('a', 'outer'), call('b', 'step')],
    };
    state.newMessages.push(assistant);
    const batch = await runToolBatch(state, setup, assistant.toolCalls, false);
    expect(batch.nested.map((outcome) => outcome.toolName)).toEqual(['skill']);
    const { wroteLedger } = recordToolResults(state, setup, assistant, batch);
    expect(wroteLedger).toBe(true);
    expect(state.activeSkills).toEqual(['deploy']);
    expect(state.newMessages.slice(1)).toEqual([
      { role: 'tool', toolCallId: 'a', toolName: 'outer', content: 'outer saw active' },
      { role: 'tool', toolCallId: 'b', toolName: 'step', content: 'noted' },
    ]);
    const quiet = recordToolResults(state, setup, assistant, { outcomes: [], nested: [] });
    expect(quiet.wroteLedger).toBe(false);
  });
});
