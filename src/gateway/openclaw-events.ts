import type { RunWireEvent, SessionChange } from './event-hub.js';

/** One OpenClaw event frame's content; `droppable` ones may be skipped for a client that reads too slowly. */
export interface OpenClawEvent {
  event: string;
  payload: Record<string, unknown>;
  droppable?: boolean;
}

function chatMessage(text: string, ts: number) {
  return { role: 'assistant', content: [{ type: 'text', text }], timestamp: ts };
}

/**
 * A hub run event as OpenClaw's `agent` and `chat` events for a client of `protocol` with `caps`; undefined
 * when the client did not ask for it (tool events without the `tool-events` capability).
 */
export function toOpenClawRunEvent(
  event: RunWireEvent,
  options: { protocol: number; caps: ReadonlySet<string> },
): OpenClawEvent | undefined {
  const { run } = event;
  const base = { runId: run.runId, sessionKey: run.sessionKey, agentId: run.agentId };
  switch (event.kind) {
    case 'lifecycle': {
      const data =
        event.phase === 'start'
          ? { phase: 'start', startedAt: event.startedAt }
          : {
              phase: event.phase,
              startedAt: event.startedAt,
              endedAt: event.endedAt,
              aborted: event.status === 'aborted',
              stopReason: event.stopReason,
              ...(event.error ? { error: event.error.message, errorCode: event.error.code } : {}),
            };
      return { event: 'agent', payload: { ...base, stream: 'lifecycle', data, seq: run.seq, ts: run.ts } };
    }
    case 'assistant':
      return {
        event: 'agent',
        payload: {
          ...base,
          stream: 'assistant',
          data: { text: event.text, delta: event.delta },
          seq: run.seq,
          ts: run.ts,
        },
      };
    case 'tool':
      if (!options.caps.has('tool-events')) return undefined;
      return {
        event: 'agent',
        payload: {
          ...base,
          stream: 'tool',
          data: {
            phase: event.phase,
            name: event.toolName,
            toolCallId: event.toolCallId,
            ...(event.args !== undefined ? { args: event.args } : {}),
            ...(event.isError !== undefined ? { isError: event.isError } : {}),
            ...(event.durationMs !== undefined ? { durationMs: event.durationMs } : {}),
          },
          seq: run.seq,
          ts: run.ts,
        },
      };
    case 'chat-delta':
      // v3 deltas are cumulative snapshots, so skipping one for a slow client loses nothing; v4 clients
      // append `deltaText`, so theirs are never dropped.
      return {
        event: 'chat',
        payload: {
          ...base,
          seq: run.seq,
          state: 'delta',
          ...(options.protocol >= 4
            ? { deltaText: event.deltaText, ...(event.replace ? { replace: true } : {}) }
            : {}),
          message: chatMessage(event.text, run.ts),
        },
        droppable: options.protocol < 4,
      };
    case 'chat-end':
      return {
        event: 'chat',
        payload: {
          ...base,
          seq: run.seq,
          state: event.state,
          stopReason: event.stopReason,
          ...(event.state !== 'error' || event.text ? { message: chatMessage(event.text, run.ts) } : {}),
          ...(event.errorMessage !== undefined
            ? { errorMessage: event.errorMessage, errorKind: event.errorKind }
            : {}),
        },
      };
  }
}

/** OpenClaw's `sessions.changed` payload: the key, who owns it, why, and for runs the phase and run id. */
export function sessionsChangedPayload(change: SessionChange): Record<string, unknown> {
  return {
    sessionKey: change.sessionKey,
    key: change.sessionKey,
    ...(change.agentId !== undefined ? { agentId: change.agentId } : {}),
    reason:
      change.reason === 'run' ? `agent.run.${change.phase === 'start' ? 'started' : 'ended'}` : change.reason,
    ...(change.phase !== undefined ? { phase: change.phase } : {}),
    ...(change.runId !== undefined ? { runId: change.runId } : {}),
    ...(change.sessionId !== undefined ? { sessionId: change.sessionId } : {}),
    updatedAt: change.ts,
    ts: change.ts,
  };
}
