import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { addUsage, createRunState, overBudget, resultOf } from '../../../src/engage/run-state.js';
import { stepOptions } from './helpers.js';

describe('engage run state', () => {
  it('applies defaults and refuses limits that cannot work', () => {
    const { options } = stepOptions();
    const state = createRunState(options);
    expect(state.limits).toMatchObject({ maxTurns: 50, maxParallelTools: 8, maxToolResultChars: 50_000 });
    expect(state.contextOptions).toMatchObject({ compactThreshold: 0.7, ledgerNudgeInterval: 5 });
    expect(state.scope).toEqual({ runId: 'run_1', agentId: 'main', workItemId: 'work_1' });
    expect(createRunState({ ...options, limits: { maxTurns: undefined } }).limits.maxTurns).toBe(50);
    for (const bad of [
      { limits: { maxTurns: 0 } },
      { limits: { maxParallelTools: 1.5 } },
      { limits: { costBudgetUsd: 1 } },
      { context: { compactThreshold: 0 } },
      { context: { compactThreshold: 1.5 } },
    ]) {
      expect(() => createRunState({ ...options, ...bad })).toThrow(
        expect.objectContaining({ code: 'INVALID_REQUEST' }),
      );
    }
  });

  it('adds usage, prices it, and says when a token or cost budget is passed', () => {
    const { options } = stepOptions();
    const state = createRunState({
      ...options,
      pricing: { inputUsdPerMTok: 1_000_000, outputUsdPerMTok: 2_000_000 },
      limits: { tokenBudget: 10, costBudgetUsd: 100 },
    });
    addUsage(state, 4, 3);
    expect(state.usage).toEqual({ inputTokens: 4, outputTokens: 3, costUsd: 10 });
    expect(overBudget(state)).toBe(false);
    addUsage(state, 4, 0);
    expect(overBudget(state)).toBe(true);
    const costly = createRunState({
      ...options,
      pricing: { inputUsdPerMTok: 1_000_000, outputUsdPerMTok: 0 },
      limits: { costBudgetUsd: 2 },
    });
    addUsage(costly, 3, 0);
    expect(overBudget(costly)).toBe(true);
  });

  it('follows the caller’s abort signal until detached', () => {
    const controller = new AbortController();
    const { options } = stepOptions([], { signal: controller.signal });
    const state = createRunState(options);
    controller.abort('stop');
    expect(state.signal.aborted).toBe(true);
    const later = new AbortController();
    const detached = createRunState({ ...options, signal: later.signal });
    detached.detach();
    later.abort();
    expect(detached.signal.aborted).toBe(false);
    const already = new AbortController();
    already.abort();
    expect(createRunState({ ...options, signal: already.signal }).signal.aborted).toBe(true);
  });

  it('makes its own signal only when something reads it, as aborted as the caller’s was until detached', () => {
    const Original = globalThis.AbortController;
    let made = 0;
    globalThis.AbortController = class extends Original {
      constructor() {
        super();
        made++;
      }
    };
    try {
      const caller = new Original();
      const { options } = stepOptions([], { signal: caller.signal });
      const state = createRunState(options);
      expect(state.callerSignal).toBe(caller.signal);
      expect(state.aborted()).toBe(false);
      expect(made).toBe(0);
      const own = state.signal;
      expect(made).toBe(1);
      expect(own).not.toBe(caller.signal);
      expect(state.signal).toBe(own);
      caller.abort('stop');
      expect(state.aborted()).toBe(true);
      expect(own.aborted).toBe(true);
      expect(own.reason).toBe('stop');

      // Read first after the run stopped following: aborted exactly when the caller's was by then.
      const before = new Original();
      before.abort('early');
      const abortedThenDetached = createRunState({ ...options, signal: before.signal });
      abortedThenDetached.detach();
      expect(abortedThenDetached.aborted()).toBe(true);
      expect(abortedThenDetached.signal.reason).toBe('early');
      const after = new Original();
      const detachedThenAborted = createRunState({ ...options, signal: after.signal });
      detachedThenAborted.detach();
      after.abort();
      expect(detachedThenAborted.aborted()).toBe(false);
      expect(detachedThenAborted.signal.aborted).toBe(false);
      expect(getEventListeners(after.signal, 'abort')).toHaveLength(0);
    } finally {
      globalThis.AbortController = Original;
    }
  });

  it('a run without a caller signal is not abortable, and its own signal never aborts', () => {
    const { options } = stepOptions();
    const first = createRunState(options);
    expect(first.abortable).toBe(false);
    expect(first.signal.aborted).toBe(false);
    first.detach();
    // Each run has a signal of its own: a listener a tool leaves on one does not reach the next run's.
    first.signal.addEventListener('abort', () => {});
    expect(createRunState(options).signal).not.toBe(first.signal);
    const caller = new AbortController();
    const abortable = createRunState({ ...options, signal: caller.signal });
    expect(abortable.abortable).toBe(true);
    caller.abort();
    expect(abortable.signal.aborted).toBe(true);
  });

  it('reports the result as it stands', () => {
    const { options } = stepOptions();
    const state = createRunState(options);
    state.lastText = 'done';
    state.turns = 2;
    expect(resultOf(state, 'completed')).toEqual({
      status: 'completed',
      text: 'done',
      newMessages: [],
      usage: { inputTokens: 0, outputTokens: 0 },
      turns: 2,
      activeSkills: [],
      compactions: 0,
    });
    expect(resultOf(state, 'error', { code: 'X', message: 'y', retryable: false }).error?.code).toBe('X');
  });
});
