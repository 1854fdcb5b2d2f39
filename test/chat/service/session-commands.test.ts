import { describe, expect, it } from 'vitest';
import { compactSession, resetSession } from '../../../src/chat/service/session-commands.js';
import { fakeContext } from './context.js';

describe('chat step: session commands', () => {
  it('reset archives the active session and its memory, then opens a new one', async () => {
    const { ctx, calls } = fakeContext({ activeSession: 'old-session' });
    const result = await resetSession(ctx, {
      sessionKey: 'agent:main:main',
      agentId: 'main',
      reason: 'new',
      archive: true,
    });
    expect(result).toEqual({
      sessionId: 'session-of-agent:main:main',
      previousSessionId: 'old-session',
      archived: true,
    });
    expect(calls.map((call) => call[0])).toEqual([
      'sessions.getActive',
      'memory.archive',
      'sessions.archive',
      'autoRecall.forget',
      'sessions.ensureActive',
    ]);
    expect(calls.find((call) => call[0] === 'autoRecall.forget')).toEqual([
      'autoRecall.forget',
      'old-session',
    ]);
  });

  it('reset without archive keeps the memory and reports it not archived', async () => {
    const { ctx, calls } = fakeContext({ activeSession: 'old-session' });
    const result = await resetSession(ctx, {
      sessionKey: 'agent:main:main',
      agentId: 'main',
      reason: 'reset',
      archive: false,
    });
    expect(result.archived).toBe(false);
    expect(calls.some((call) => call[0] === 'memory.archive')).toBe(false);
  });

  it('reset with no active session only opens one', async () => {
    const { ctx } = fakeContext();
    const result = await resetSession(ctx, {
      sessionKey: 's',
      agentId: 'main',
      reason: 'new',
      archive: true,
    });
    expect(result).toEqual({ sessionId: 'session-of-s', archived: false });
  });

  it('compact reports the active context before and after the summary', async () => {
    const { ctx } = fakeContext({ summarized: [1, 2, 3] });
    await expect(compactSession(ctx, { sessionKey: 's', agentId: 'main' })).resolves.toEqual({
      compacted: true,
      tokensBefore: 100,
      tokensAfter: 40,
      entriesBefore: 10,
      entriesAfter: 4,
    });
  });

  it('compact with nothing summarized says so', async () => {
    const { ctx } = fakeContext();
    const result = await compactSession(ctx, { sessionKey: 's', agentId: 'main' });
    expect(result.compacted).toBe(false);
  });
});
