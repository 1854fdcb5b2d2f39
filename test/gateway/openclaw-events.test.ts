import { describe, expect, it } from 'vitest';
import type { RunRef } from '../../src/gateway/index.js';
import { sessionsChangedPayload, toOpenClawRunEvent } from '../../src/gateway/openclaw-events.js';

const run: RunRef = { runId: 'r1', sessionKey: 'agent:main:main', agentId: 'main', seq: 3, ts: 1_000 };
const v4 = { protocol: 4, caps: new Set<string>() };

describe('OpenClaw run events', () => {
  it('maps lifecycle ends with their stop reason and error', () => {
    expect(
      toOpenClawRunEvent(
        {
          kind: 'lifecycle',
          run,
          phase: 'error',
          startedAt: 1,
          endedAt: 2,
          status: 'error',
          stopReason: 'error',
          error: { code: 'PROVIDER_TIMEOUT', message: 'slow', retryable: true },
        },
        v4,
      ),
    ).toEqual({
      event: 'agent',
      payload: {
        runId: 'r1',
        sessionKey: 'agent:main:main',
        agentId: 'main',
        stream: 'lifecycle',
        data: {
          phase: 'error',
          startedAt: 1,
          endedAt: 2,
          aborted: false,
          stopReason: 'error',
          error: 'slow',
          errorCode: 'PROVIDER_TIMEOUT',
        },
        seq: 3,
        ts: 1_000,
      },
    });
  });

  it('gives v4 clients deltaText, v3 clients droppable cumulative deltas', () => {
    const delta = { kind: 'chat-delta' as const, run, text: 'Hello', deltaText: 'lo', replace: false };
    expect(toOpenClawRunEvent(delta, v4)).toMatchObject({
      event: 'chat',
      payload: { state: 'delta', deltaText: 'lo', message: { content: [{ type: 'text', text: 'Hello' }] } },
      droppable: false,
    });
    const v3 = toOpenClawRunEvent(delta, { protocol: 3, caps: new Set() });
    expect(v3?.droppable).toBe(true);
    expect(v3?.payload).not.toHaveProperty('deltaText');
  });

  it('sends tool events only to clients with the tool-events capability', () => {
    const tool = {
      kind: 'tool' as const,
      run,
      phase: 'end' as const,
      toolCallId: 't1',
      toolName: 'clock',
      isError: false,
      durationMs: 4,
    };
    expect(toOpenClawRunEvent(tool, v4)).toBeUndefined();
    expect(toOpenClawRunEvent(tool, { protocol: 4, caps: new Set(['tool-events']) })?.payload).toMatchObject({
      stream: 'tool',
      data: { phase: 'end', name: 'clock', toolCallId: 't1', isError: false, durationMs: 4 },
    });
  });

  it('names run changes agent.run.started / agent.run.ended in sessions.changed', () => {
    expect(
      sessionsChangedPayload({
        sessionKey: 'agent:main:a',
        agentId: 'main',
        reason: 'run',
        phase: 'end',
        runId: 'r1',
        ts: 5,
      }),
    ).toEqual({
      sessionKey: 'agent:main:a',
      key: 'agent:main:a',
      agentId: 'main',
      reason: 'agent.run.ended',
      phase: 'end',
      runId: 'r1',
      updatedAt: 5,
      ts: 5,
    });
    expect(
      sessionsChangedPayload({
        sessionKey: 'agent:main:a',
        agentId: undefined,
        reason: 'new',
        sessionId: 's2',
        ts: 6,
      }),
    ).toEqual({
      sessionKey: 'agent:main:a',
      key: 'agent:main:a',
      reason: 'new',
      sessionId: 's2',
      updatedAt: 6,
      ts: 6,
    });
  });
});
