import { describe, expect, it } from 'vitest';
import type { ChatRunRecord } from '../../../src/chat/index.js';
import { newRecord } from '../../../src/chat/service/records.js';
import { abortRuns, startTurn } from '../../../src/chat/service/turn.js';
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

  it('aborts the live runs of one session only, or the one run asked for', async () => {
    const { ctx } = fakeContext();
    const controllers = new Map<string, AbortController>();
    for (const [runId, sessionKey] of [
      ['a', 's'],
      ['b', 's'],
      ['c', 'other'],
    ] as const) {
      const record: ChatRunRecord = newRecord(ctx, runId, sessionKey, 'main');
      const controller = new AbortController();
      controllers.set(runId, controller);
      ctx.live.set(runId, { record, controller, done: Promise.resolve(record) });
    }
    await expect(abortRuns(ctx, { sessionKey: 's', runId: 'b' })).resolves.toEqual({
      aborted: true,
      runIds: ['b'],
    });
    expect(controllers.get('a')?.signal.aborted).toBe(false);
    await expect(abortRuns(ctx, { sessionKey: 's' })).resolves.toEqual({ aborted: true, runIds: ['a', 'b'] });
    expect(controllers.get('c')?.signal.aborted).toBe(false);
    await expect(abortRuns(ctx, { sessionKey: 'none' })).resolves.toEqual({ aborted: false, runIds: [] });
  });
});
