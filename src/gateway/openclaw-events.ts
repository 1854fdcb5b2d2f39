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

/** An `agent` event frame of one stream of the run. */
function agentEvent(run: RunWireEvent['run'], stream: string, data: Record<string, unknown>): OpenClawEvent {
  return {
    event: 'agent',
    payload: {
      runId: run.runId,
      sessionKey: run.sessionKey,
      agentId: run.agentId,
      stream,
      data,
      seq: run.seq,
      ts: run.ts,
    },
  };
}

/**
 * A hub run event as OpenClaw's `agent` and `chat` events for a client of `protocol` with `caps`; undefined
 * when the client did not ask for it (tool events without the `tool-events` capability).
 */
export function toOpenClawRunEvent(
  event: RunWireEvent,
  options: { protocol: number; caps: ReadonlySet<string> },
): OpenClawEvent | undefined {
  // Payloads are built key by key rather than spread from a shared base: several frames a turn, and the
  // spreads showed in the turn's profile. The key order is the frames' own.
  const { run } = event;
  switch (event.kind) {
    case 'lifecycle': {
      let data: Record<string, unknown>;
      if (event.phase === 'start') data = { phase: 'start', startedAt: event.startedAt };
      else {
        data = {
          phase: event.phase,
          startedAt: event.startedAt,
          endedAt: event.endedAt,
          aborted: event.status === 'aborted',
          stopReason: event.stopReason,
        };
        if (event.error) {
          data.error = event.error.message;
          data.errorCode = event.error.code;
        }
      }
      return agentEvent(run, 'lifecycle', data);
    }
    case 'assistant':
      return agentEvent(run, 'assistant', { text: event.text, delta: event.delta });
    case 'tool': {
      if (!options.caps.has('tool-events')) return undefined;
      const data: Record<string, unknown> = {
        phase: event.phase,
        name: event.toolName,
        toolCallId: event.toolCallId,
      };
      if (event.args !== undefined) data.args = event.args;
      if (event.isError !== undefined) data.isError = event.isError;
      if (event.durationMs !== undefined) data.durationMs = event.durationMs;
      return agentEvent(run, 'tool', data);
    }
    case 'chat-delta': {
      // v3 deltas are cumulative snapshots, so skipping one for a slow client loses nothing; v4 clients
      // append `deltaText`, so theirs are never dropped.
      const payload: Record<string, unknown> = {
        runId: run.runId,
        sessionKey: run.sessionKey,
        agentId: run.agentId,
        seq: run.seq,
        state: 'delta',
      };
      if (options.protocol >= 4) {
        payload.deltaText = event.deltaText;
        if (event.replace) payload.replace = true;
      }
      payload.message = chatMessage(event.text, run.ts);
      return { event: 'chat', payload, droppable: options.protocol < 4 };
    }
    case 'chat-end': {
      const payload: Record<string, unknown> = {
        runId: run.runId,
        sessionKey: run.sessionKey,
        agentId: run.agentId,
        seq: run.seq,
        state: event.state,
        stopReason: event.stopReason,
      };
      if (event.state !== 'error' || event.text) payload.message = chatMessage(event.text, run.ts);
      if (event.errorMessage !== undefined) {
        payload.errorMessage = event.errorMessage;
        payload.errorKind = event.errorKind;
      }
      return { event: 'chat', payload };
    }
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
