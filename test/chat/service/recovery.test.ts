import { describe, expect, it } from 'vitest';
import { newRecord } from '../../../src/chat/service/records.js';
import { failInterrupted, markEnded } from '../../../src/chat/service/recovery.js';
import { fakeContext } from './context.js';

describe('chat step: recovery', () => {
  it('marks a run ended in the session write order', async () => {
    const { ctx, calls } = fakeContext();
    await markEnded(ctx, newRecord(ctx, 'run-1', 's', 'main'));
    expect(calls.map((call) => call[0])).toEqual([
      'sessions.ensureActive',
      'memory.persist',
      'inbox.markEnded',
    ]);
  });

  it('fails interrupted runs oldest first with a note, an error final and RUN_INTERRUPTED', async () => {
    const { ctx, calls, events } = fakeContext({
      running: [
        { runId: 'late', sessionKey: 's', agentId: 'main', startedAt: 20 },
        { runId: 'early', sessionKey: 's', agentId: 'main', startedAt: 10 },
      ],
    });
    await expect(failInterrupted(ctx)).resolves.toEqual(['early', 'late']);
    const early = ctx.finished.get('early');
    expect(early).toMatchObject({ status: 'error', startedAt: 10, endedAt: 1_000 });
    expect(early?.error).toMatchObject({ code: 'RUN_INTERRUPTED', retryable: true });
    expect(calls.filter((call) => call[0] === 'inbox.markEnded')).toEqual([
      ['inbox.markEnded', 'early'],
      ['inbox.markEnded', 'late'],
    ]);
    expect(events.map((event) => event.type)).toEqual(['run:finished', 'run:finished']);
  });

  it('skips runs this process already knows', async () => {
    const { ctx } = fakeContext({
      running: [{ runId: 'known', sessionKey: 's', agentId: 'main', startedAt: 1 }],
    });
    const record = newRecord(ctx, 'known', 's', 'main');
    ctx.finished.set('known', record);
    await failInterrupted(ctx);
    expect(ctx.finished.get('known')).toBe(record);
  });
});
