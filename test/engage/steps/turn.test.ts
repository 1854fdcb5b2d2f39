import { describe, expect, it } from 'vitest';
import { createRunState } from '../../../src/engage/run-state.js';
import { prepareRun } from '../../../src/engage/setup.js';
import { runModelTurn } from '../../../src/engage/turn.js';
import type { Ledger } from '../../../src/ledger/index.js';
import { createHookPipeline } from '../../../src/tools/index.js';
import { stepOptions } from './helpers.js';

async function turnOf(...args: Parameters<typeof stepOptions>) {
  const harness = stepOptions(...args);
  const state = createRunState(harness.options);
  const setup = await prepareRun(state);
  return { ...harness, state, setup };
}

describe('engage turn', () => {
  it('streams the answer and ends the run when the model asks for no tools', async () => {
    const { state, setup, types } = await turnOf([
      { text: ['Hi', ' there'], usage: { inputTokens: 5, outputTokens: 2 } },
    ]);
    const step = await runModelTurn(state, setup, 1);
    expect(step).toMatchObject({ result: { status: 'completed', text: 'Hi there', turns: 1 } });
    expect(state.usage).toMatchObject({ inputTokens: 5, outputTokens: 2 });
    expect(state.newMessages).toEqual([{ role: 'assistant', content: 'Hi there' }]);
    expect(types()).toEqual(['run:text-delta', 'run:text-delta', 'run:finished']);
  });

  it('returns the tool calls, leaving the run open', async () => {
    const { state, setup, types } = await turnOf([
      { text: 'let me look', toolCalls: [{ id: 'c1', name: 'noop', arguments: { n: 1 } }] },
    ]);
    const step = await runModelTurn(state, setup, 3);
    expect(step).toEqual({
      assistant: {
        role: 'assistant',
        content: 'let me look',
        toolCalls: [{ id: 'c1', name: 'noop', arguments: { n: 1 } }],
      },
      toolCalls: [{ id: 'c1', name: 'noop', arguments: { n: 1 } }],
    });
    expect(state.turns).toBe(3);
    expect(types()).not.toContain('run:finished');
  });

  it('a provider error keeps the partial text and is recorded in the ledger', async () => {
    const appended: unknown[] = [];
    const ledger = {
      append: async (_id: string, entry: unknown) => appended.push(entry),
    } as unknown as Ledger;
    const { state, setup } = await turnOf(
      [{ text: 'partial', error: { code: 'RATE_LIMITED', message: 'slow down', retryable: true } }],
      { ledger },
    );
    const step = await runModelTurn(state, setup, 1);
    expect(step).toMatchObject({
      result: { status: 'error', error: { code: 'RATE_LIMITED', retryable: true } },
    });
    expect(state.newMessages).toEqual([{ role: 'assistant', content: 'partial' }]);
    expect(appended).toEqual([
      { entryType: 'error', content: 'run run_1 failed on a model call: RATE_LIMITED: slow down' },
    ]);
  });

  it('an aborted run makes no model call; a blocking hook ends the run before it', async () => {
    const controller = new AbortController();
    controller.abort();
    const aborted = await turnOf([], { signal: controller.signal });
    expect(await runModelTurn(aborted.state, aborted.setup, 1)).toMatchObject({
      result: { status: 'aborted' },
    });
    expect(aborted.model.requests).toHaveLength(0);

    const hooks = createHookPipeline({
      hooks: [
        { name: 'gate', events: ['before_llm_call'], handle: () => ({ action: 'block', reason: 'not now' }) },
      ],
    });
    const blocked = await turnOf([], { hooks });
    expect(await runModelTurn(blocked.state, blocked.setup, 1)).toMatchObject({
      result: {
        status: 'blocked',
        error: { code: 'HOOK_BLOCKED', message: 'Blocked by hook gate: not now' },
      },
    });
    expect(blocked.model.requests).toHaveLength(0);
  });
});
