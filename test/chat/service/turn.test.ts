import { describe, expect, it } from 'vitest';
import type { ChatRunRecord } from '../../../src/chat/index.js';
import { createAcceptance } from '../../../src/chat/service/acceptance.js';
import { newRecord } from '../../../src/chat/service/records.js';
import { abortRuns, startTurn } from '../../../src/chat/service/turn.js';
import { ErrorCodes, LazyAbortController, ProviderError, SystemError } from '../../../src/util/index.js';
import { fakeContext } from './context.js';

describe('chat step: turn', () => {
  it('runs a slash command in the session lane, drops it from the inbox and settles the run', async () => {
    const { ctx, calls, events } = fakeContext({ slashCommands: { ping: async () => 'pong' } });
    startTurn(ctx, { runId: 'run-1', sessionKey: 's', agentId: 'main', text: '/ping' });
    const live = ctx.live.get('run-1');
    expect(live?.record.status).toBe('running');
    const record = await live?.done;
    expect(record).toMatchObject({ status: 'completed', text: 'pong', endedAt: 1_000 });
    expect(ctx.live.has('run-1')).toBe(false);
    expect(ctx.finished.get('run-1')).toBe(record);
    expect(calls.map((call) => call[0])).toContain('inbox.delete');
    expect(events.map((event) => event.type)).toEqual(['run:started', 'run:text-delta', 'run:finished']);
  });

  it('turns an unexpected failure into INTERNAL and publishes an error final', async () => {
    const { ctx, events } = fakeContext({
      runTurn: async () => {
        throw new Error('engine exploded');
      },
    });
    startTurn(ctx, { runId: 'run-1', sessionKey: 's', agentId: 'main', text: 'hello' });
    const record = await ctx.live.get('run-1')?.done;
    expect(record?.status).toBe('error');
    expect(record?.error).toMatchObject({ code: 'INTERNAL', retryable: false });
    expect(events.at(-1)).toMatchObject({ type: 'run:finished', data: { status: 'error' } });
  });

  it("keeps the code and message of agentd's own errors, whoever's fault", async () => {
    const thrown = [
      new SystemError({ code: ErrorCodes.conflict, message: 'the session ended twice' }),
      new ProviderError({ code: ErrorCodes.providerRateLimited, message: 'slow down', retryable: true }),
    ];
    for (const error of thrown) {
      const { ctx, events } = fakeContext({
        runTurn: async () => {
          throw error;
        },
      });
      startTurn(ctx, { runId: 'run-1', sessionKey: 's', agentId: 'main', text: 'hello' });
      const record = await ctx.live.get('run-1')?.done;
      expect(record?.error).toEqual(error.toJSON());
      expect(events.at(-1)).toMatchObject({ type: 'run:finished', data: { error: error.toJSON() } });
    }
  });

  it('a message waiting in the inbox outlives an unreachable store: its turn tries again and stores it once', async () => {
    const { ctx, calls, events } = fakeContext({
      sessionLookupFailures: 2,
      runTurn: async () => ({
        status: 'completed',
        text: 'hi',
        newMessages: [],
        usage: { inputTokens: 1, outputTokens: 1 },
        turns: 1,
        activeSkills: [],
        compactions: 0,
      }),
    });
    Object.assign(ctx, { storeRetryMs: 1 });
    startTurn(ctx, { runId: 'run-1', sessionKey: 's', agentId: 'main', text: 'hello' });
    const record = await ctx.live.get('run-1')?.done;
    expect(record?.status).toBe('completed');
    const stored = calls.findIndex((call) => call[0] === 'memory.append');
    expect(calls.slice(0, stored).filter((call) => call[0] === 'sessions.ensureActive')).toHaveLength(3);
    expect(calls.filter((call) => call[0] === 'memory.append')).toHaveLength(1);
    // No error final: the run's own events come from the engage loop, faked here.
    expect(events).toEqual([]);
  });

  it('gives up on an unreachable store after storeRetryForMs and reports STORE_UNAVAILABLE', async () => {
    const { ctx, calls, events } = fakeContext({ sessionLookupFailures: 100 });
    Object.assign(ctx, { storeRetryMs: 1, storeRetryForMs: 0 });
    startTurn(ctx, { runId: 'run-1', sessionKey: 's', agentId: 'main', text: 'hello' });
    const record = await ctx.live.get('run-1')?.done;
    expect(record?.error).toMatchObject({ code: 'STORE_UNAVAILABLE', retryable: true });
    expect(calls.filter((call) => call[0] === 'sessions.ensureActive')).toHaveLength(1);
    expect(events.at(-1)).toMatchObject({ type: 'run:finished', data: { status: 'error' } });
  });

  it('a stop while the turn waits for the store ends it aborted without another attempt', async () => {
    const { ctx, calls, events } = fakeContext({ sessionLookupFailures: 100 });
    Object.assign(ctx, { storeRetryMs: 10_000 });
    startTurn(ctx, { runId: 'run-1', sessionKey: 's', agentId: 'main', text: 'hello' });
    const done = ctx.live.get('run-1')?.done;
    await expect.poll(() => calls.filter((call) => call[0] === 'sessions.ensureActive').length).toBe(1);
    await abortRuns(ctx, { sessionKey: 's' });
    const record = await done;
    expect(record?.status).toBe('aborted');
    expect(calls.filter((call) => call[0] === 'sessions.ensureActive')).toHaveLength(1);
    // Its clients hear the end, and the message does not come back after a restart.
    expect(events.at(-1)).toMatchObject({ type: 'run:finished', data: { status: 'aborted' } });
    expect(calls).toContainEqual(['inbox.delete', 'run-1']);
  });

  it('does not try again once the message is stored, nor for a message its own turn acknowledges', async () => {
    const stored = fakeContext({
      runTurn: async () => {
        throw new SystemError({ code: ErrorCodes.storeUnavailable, message: 'gone', retryable: true });
      },
    });
    Object.assign(stored.ctx, { storeRetryMs: 1 });
    startTurn(stored.ctx, { runId: 'run-1', sessionKey: 's', agentId: 'main', text: 'hello' });
    const record = await stored.ctx.live.get('run-1')?.done;
    expect(record?.error).toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(stored.calls.filter((call) => call[0] === 'memory.append')).toHaveLength(1);

    const direct = fakeContext({ sessionLookupFailures: 1 });
    Object.assign(direct.ctx, { storeRetryMs: 1 });
    const acceptance = createAcceptance();
    startTurn(direct.ctx, { runId: 'run-2', sessionKey: 's', agentId: 'main', text: 'hello' }, acceptance);
    await expect(acceptance.stored).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(direct.calls.filter((call) => call[0] === 'sessions.ensureActive')).toHaveLength(1);
  });

  it('aborts the live runs of one session only, or the one run asked for', async () => {
    const { ctx } = fakeContext();
    const controllers = new Map<string, LazyAbortController>();
    for (const [runId, sessionKey] of [
      ['a', 's'],
      ['b', 's'],
      ['c', 'other'],
    ] as const) {
      const record: ChatRunRecord = newRecord(ctx, runId, sessionKey, 'main');
      const controller = new LazyAbortController();
      controllers.set(runId, controller);
      ctx.live.set(runId, { record, controller, done: Promise.resolve(record) });
    }
    await expect(abortRuns(ctx, { sessionKey: 's', runId: 'b' })).resolves.toEqual({
      aborted: true,
      runIds: ['b'],
    });
    expect(controllers.get('a')?.aborted).toBe(false);
    await expect(abortRuns(ctx, { sessionKey: 's' })).resolves.toEqual({ aborted: true, runIds: ['a', 'b'] });
    expect(controllers.get('c')?.aborted).toBe(false);
    expect(controllers.get('b')?.reason).toMatchObject({ code: ErrorCodes.aborted });
    await expect(abortRuns(ctx, { sessionKey: 'none' })).resolves.toEqual({ aborted: false, runIds: [] });
  });
});
