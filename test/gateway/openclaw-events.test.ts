import { describe, expect, it } from 'vitest';
import type { RunRef, RunWireEvent } from '../../src/gateway/index.js';
import {
  type OpenClawRunEvent,
  sessionsChangedPayload,
  toOpenClawRunEvent,
} from '../../src/gateway/openclaw-events.js';

const run: RunRef = { runId: 'r1', sessionKey: 'agent:main:main', agentId: 'main', seq: 3, ts: 1_000 };
const v4 = { protocol: 4, caps: new Set<string>() };

/** The frame content as the client reads it: the payload parsed back from the JSON text. */
const asRead = (wire: OpenClawRunEvent | undefined) =>
  wire && { event: wire.event, payload: JSON.parse(wire.payloadJson), droppable: wire.droppable };

describe('OpenClaw run events', () => {
  it('maps lifecycle ends with their stop reason and error', () => {
    expect(
      asRead(
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
    expect(asRead(toOpenClawRunEvent(delta, v4))).toMatchObject({
      event: 'chat',
      payload: { state: 'delta', deltaText: 'lo', message: { content: [{ type: 'text', text: 'Hello' }] } },
      droppable: false,
    });
    const v3 = asRead(toOpenClawRunEvent(delta, { protocol: 3, caps: new Set() }));
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
    expect(
      asRead(toOpenClawRunEvent(tool, { protocol: 4, caps: new Set(['tool-events']) }))?.payload,
    ).toMatchObject({
      stream: 'tool',
      data: { phase: 'end', name: 'clock', toolCallId: 't1', isError: false, durationMs: 4 },
    });
  });

  it('writes each payload as JSON.stringify writes the object, hostile text and missing fields included', () => {
    const hostile = [
      '',
      'say "hi"\n\\',
      '\u2028\u2029</script>',
      '\ud83d\ude00 \ud800 lone',
      '\u0000\u001f\u007f',
    ];
    const runs: RunRef[] = [
      { runId: 'r"1', sessionKey: hostile[1], agentId: hostile[2], seq: 7, ts: 1_796_000_000_000 },
      { runId: hostile[3]!, sessionKey: undefined, agentId: undefined, seq: 0, ts: Number.NaN },
    ];
    const message = (text: string, ts: number) => ({
      role: 'assistant',
      content: [{ type: 'text', text }],
      timestamp: ts,
    });
    for (const ref of runs) {
      const head = { runId: ref.runId, sessionKey: ref.sessionKey, agentId: ref.agentId };
      const agent = (stream: string, data: object) => ({ ...head, stream, data, seq: ref.seq, ts: ref.ts });
      for (const text of hostile) {
        const cases: Array<[RunWireEvent, number, object]> = [
          [
            { kind: 'lifecycle', run: ref, phase: 'start', startedAt: 5, model: 'm' },
            4,
            agent('lifecycle', { phase: 'start', startedAt: 5 }),
          ],
          [
            {
              kind: 'lifecycle',
              run: ref,
              phase: 'end',
              startedAt: 5,
              endedAt: 9,
              status: 'aborted',
              stopReason: text,
            },
            4,
            agent('lifecycle', { phase: 'end', startedAt: 5, endedAt: 9, aborted: true, stopReason: text }),
          ],
          [
            {
              kind: 'lifecycle',
              run: ref,
              phase: 'error',
              startedAt: 5,
              endedAt: Number.POSITIVE_INFINITY,
              status: 'error',
              stopReason: 'error',
              error: { code: 'X', message: text, retryable: false },
            },
            4,
            agent('lifecycle', {
              phase: 'error',
              startedAt: 5,
              endedAt: Number.POSITIVE_INFINITY,
              aborted: false,
              stopReason: 'error',
              error: text,
              errorCode: 'X',
            }),
          ],
          [
            { kind: 'assistant', run: ref, text, delta: text.slice(1) },
            4,
            agent('assistant', { text, delta: text.slice(1) }),
          ],
          [
            { kind: 'chat-delta', run: ref, text, deltaText: text, replace: true },
            4,
            {
              ...head,
              seq: ref.seq,
              state: 'delta',
              deltaText: text,
              replace: true,
              message: message(text, ref.ts),
            },
          ],
          [
            { kind: 'chat-delta', run: ref, text, deltaText: text, replace: false },
            3,
            { ...head, seq: ref.seq, state: 'delta', message: message(text, ref.ts) },
          ],
          [
            { kind: 'chat-end', run: ref, state: 'final', text, stopReason: 'stop' },
            4,
            { ...head, seq: ref.seq, state: 'final', stopReason: 'stop', message: message(text, ref.ts) },
          ],
          [
            {
              kind: 'chat-end',
              run: ref,
              state: 'error',
              text,
              stopReason: 'error',
              errorMessage: text,
              errorKind: undefined,
            },
            4,
            {
              ...head,
              seq: ref.seq,
              state: 'error',
              stopReason: 'error',
              ...(text ? { message: message(text, ref.ts) } : {}),
              errorMessage: text,
            },
          ],
        ];
        for (const [event, protocol, expected] of cases) {
          const wire = toOpenClawRunEvent(event, { protocol, caps: new Set() });
          expect(wire?.payloadJson, `${event.kind} ${JSON.stringify(text)}`).toBe(JSON.stringify(expected));
        }
      }
    }
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
