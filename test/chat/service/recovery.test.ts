import { describe, expect, it } from 'vitest';
import { newRecord } from '../../../src/chat/service/records.js';
import {
  failInterrupted,
  markEnded,
  ownersAlive,
  readEndedRuns,
} from '../../../src/chat/service/recovery.js';
import type { MessageMark } from '../../../src/memory/index.js';
import type { createManualClock } from '../../../src/util/index.js';
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

  it('keeps how a run that ended without a reply ended: its status and error', async () => {
    const { ctx, calls } = fakeContext();
    const failed = newRecord(ctx, 'run-2', 's', 'main');
    failed.status = 'error';
    failed.error = { code: 'PROVIDER_ERROR', message: 'boom', retryable: false };
    failed.endedAt = 900;
    await markEnded(ctx, failed);
    const silent = newRecord(ctx, 'run-3', 's', 'main');
    silent.status = 'completed';
    await markEnded(ctx, silent);
    expect(calls.filter((call) => call[0].startsWith('inbox.'))).toEqual([
      ['inbox.markEndedWithoutReply', 'run-2', 'error', 'PROVIDER_ERROR'],
      ['inbox.markEndedWithoutReply', 'run-3', 'completed'],
    ]);
  });

  it('fails interrupted runs oldest first with a note, an error final and RUN_INTERRUPTED', async () => {
    const { ctx, calls, events } = fakeContext({
      running: [
        { runId: 'late', sessionKey: 's', agentId: 'main', startedAt: 20 },
        { runId: 'early', sessionKey: 's', agentId: 'main', startedAt: 10 },
      ],
    });
    await expect(failInterrupted(ctx, await ownersAlive(ctx))).resolves.toEqual(['early', 'late']);
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
    await failInterrupted(ctx, await ownersAlive(ctx));
    expect(ctx.finished.get('known')).toBe(record);
  });
});

describe('chat step: runs that ended before this start', () => {
  const mark = (
    runId: string,
    role: 'user' | 'assistant',
    memoryId: number,
    createdAtMs: number,
    more: Record<string, unknown> = {},
  ): MessageMark => ({
    address: `s#${memoryId}`,
    sessionKey: 's',
    agentId: 'main',
    role,
    createdAtMs,
    metadata: { runId, ...more },
  });

  it("reads each run's end from its newest assistant entry, and a run with none as RUN_OUTCOME_UNKNOWN", async () => {
    const { ctx, calls } = fakeContext({
      marks: [
        mark('stopped', 'assistant', 9, 990, { interrupted: true }),
        mark('stopped', 'user', 8, 980),
        mark('failed', 'user', 7, 970),
        mark('cut', 'assistant', 6, 960, { aborted: true }),
        mark('cut', 'user', 5, 950),
        mark('answered', 'assistant', 4, 940),
        mark('answered', 'assistant', 3, 930),
        mark('answered', 'user', 2, 920),
        { ...mark('x', 'user', 1, 910), metadata: { injected: true } },
      ],
    });
    await expect(readEndedRuns(ctx)).resolves.toBe(4);
    expect(calls).toContainEqual([
      'memory.recentMessageMarks',
      { sinceMs: 1_000 - 600_000, maxEntries: 40_000 },
    ]);
    expect(ctx.endedBeforeStart.get('answered')).toMatchObject({
      status: 'completed',
      userMemoryId: 's#2',
      assistantMemoryId: 's#4',
      startedAt: 920,
      endedAt: 940,
    });
    expect(ctx.endedBeforeStart.get('answered')?.error).toBeUndefined();
    expect(ctx.endedBeforeStart.get('cut')).toMatchObject({ status: 'aborted', assistantMemoryId: 's#6' });
    expect(ctx.endedBeforeStart.get('failed')).toMatchObject({
      status: 'error',
      userMemoryId: 's#7',
      error: { code: 'RUN_OUTCOME_UNKNOWN' },
    });
    expect(ctx.endedBeforeStart.get('stopped')).toMatchObject({
      status: 'error',
      error: { code: 'RUN_INTERRUPTED' },
    });
  });

  it('reads how a run without a reply ended from its session row, for that run and key only', async () => {
    const boom = { code: 'PROVIDER_ERROR', message: 'boom', retryable: false };
    const { ctx } = fakeContext({
      marks: [
        mark('silent', 'user', 5, 950),
        mark('failed', 'user', 4, 940),
        mark('elsewhere', 'user', 3, 930),
        mark('answered', 'assistant', 2, 925),
        mark('answered', 'user', 1, 920),
      ],
      unreplied: [
        { runId: 'failed', sessionKey: 's', status: 'error', error: boom, endedAt: 945 },
        { runId: 'silent', sessionKey: 's', status: 'completed', endedAt: 955 },
        // Another key's run of the same id, and a run with a reply: neither is this transcript's unreplied run.
        { runId: 'elsewhere', sessionKey: 'other', status: 'completed', endedAt: 935 },
        { runId: 'answered', sessionKey: 's', status: 'error', error: boom, endedAt: 926 },
      ],
    });
    await expect(readEndedRuns(ctx)).resolves.toBe(4);
    expect(ctx.endedBeforeStart.get('failed')).toMatchObject({ status: 'error', error: boom, endedAt: 945 });
    expect(ctx.endedBeforeStart.get('silent')).toMatchObject({ status: 'completed', endedAt: 955 });
    expect(ctx.endedBeforeStart.get('silent')?.error).toBeUndefined();
    expect(ctx.endedBeforeStart.get('elsewhere')?.error).toMatchObject({ code: 'RUN_OUTCOME_UNKNOWN' });
    expect(ctx.endedBeforeStart.get('answered')).toMatchObject({
      status: 'completed',
      assistantMemoryId: 's#2',
    });
  });

  it('leaves out runs this process knows, stops at maxEndedRunsRead, and forgets a run past the window', async () => {
    const { ctx } = fakeContext({
      marks: [
        mark('known', 'user', 4, 990),
        mark('a', 'user', 3, 980),
        mark('b', 'user', 2, 970),
        mark('c', 'user', 1, 960),
      ],
    });
    const known = newRecord(ctx, 'known', 's', 'main');
    ctx.finished.set('known', known);
    const limited = { ...ctx, maxEndedRunsRead: 2 };
    await expect(readEndedRuns(limited)).resolves.toBe(2);
    expect(['known', 'a', 'b', 'c'].map((key) => ctx.endedBeforeStart.has(key))).toEqual([
      false,
      true,
      true,
      false,
    ]);

    // `a` ended at 980 and the window is 600,000 ms: now is 1,000.
    (ctx.clock as ReturnType<typeof createManualClock>).advance(599_979);
    expect(ctx.endedBeforeStart.get('a')).toBeDefined();
    (ctx.clock as ReturnType<typeof createManualClock>).advance(1);
    expect(ctx.endedBeforeStart.get('a')).toBeUndefined();
    expect(ctx.endedBeforeStart.has('a')).toBe(false);
  });
});
