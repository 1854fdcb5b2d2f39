import { numberJson } from '../util/index.js';
import type { RunRef, RunWireEvent, SessionChange } from './event-hub.js';

/**
 * One OpenClaw run event frame's content: its payload already as JSON, the exact text `JSON.stringify` makes
 * of the payload object (key order and omitted undefined keys included). `droppable` ones may be skipped for
 * a client that reads too slowly.
 */
export interface OpenClawRunEvent {
  event: 'agent' | 'chat';
  payloadJson: string;
  droppable?: boolean;
}

/*
 * A chat turn sends about six of these frames. Built as text, they skip the payload objects and the
 * serializer's walk over them (JSON.stringify was agentd's largest gateway function in a 100-client turn's
 * profile); every string still goes through JSON.stringify, so escaping is the serializer's own.
 */
const json = JSON.stringify;
/** `,"key":"value"`, or nothing for undefined, as JSON.stringify leaves such a key out. */
const optionalString = (key: string, value: string | undefined): string =>
  value === undefined ? '' : `,"${key}":${json(value)}`;

/** The run's fields every agent payload and every chat payload starts with. */
const runHead = (run: RunRef): string =>
  `{"runId":${json(run.runId)}${optionalString('sessionKey', run.sessionKey)}${optionalString('agentId', run.agentId)}`;

const chatMessageJson = (text: string, ts: number): string =>
  `{"role":"assistant","content":[{"type":"text","text":${json(text)}}],"timestamp":${numberJson(ts)}}`;

/** An `agent` event of one stream of the run; `dataJson` is the stream's data as JSON. */
function agentEvent(run: RunRef, stream: string, dataJson: string): OpenClawRunEvent {
  return {
    event: 'agent',
    payloadJson: `${runHead(run)},"stream":${json(stream)},"data":${dataJson},"seq":${numberJson(run.seq)},"ts":${numberJson(run.ts)}}`,
  };
}

/**
 * A hub run event as OpenClaw's `agent` and `chat` events for a client of `protocol` with `caps`; undefined
 * when the client did not ask for it (tool events without the `tool-events` capability). The key order is
 * the frames' own.
 */
export function toOpenClawRunEvent(
  event: RunWireEvent,
  options: { protocol: number; caps: ReadonlySet<string> },
): OpenClawRunEvent | undefined {
  const { run } = event;
  switch (event.kind) {
    case 'lifecycle': {
      if (event.phase === 'start')
        return agentEvent(run, 'lifecycle', `{"phase":"start","startedAt":${numberJson(event.startedAt)}}`);
      const error = event.error
        ? `${optionalString('error', event.error.message)}${optionalString('errorCode', event.error.code)}`
        : '';
      return agentEvent(
        run,
        'lifecycle',
        `{"phase":${json(event.phase)},"startedAt":${numberJson(event.startedAt)},"endedAt":${numberJson(event.endedAt)},` +
          `"aborted":${event.status === 'aborted'}${optionalString('stopReason', event.stopReason)}${error}}`,
      );
    }
    case 'assistant':
      return agentEvent(run, 'assistant', `{"text":${json(event.text)},"delta":${json(event.delta)}}`);
    case 'tool': {
      if (!options.caps.has('tool-events')) return undefined;
      // Rare and with arbitrary arguments: the object through the serializer.
      const data: Record<string, unknown> = {
        phase: event.phase,
        name: event.toolName,
        toolCallId: event.toolCallId,
      };
      if (event.args !== undefined) data.args = event.args;
      if (event.isError !== undefined) data.isError = event.isError;
      if (event.durationMs !== undefined) data.durationMs = event.durationMs;
      return agentEvent(run, 'tool', json(data));
    }
    case 'chat-delta': {
      // v3 deltas are cumulative snapshots, so skipping one for a slow client loses nothing; v4 clients
      // append `deltaText`, so theirs are never dropped.
      const v4 = options.protocol >= 4;
      const deltaText = v4
        ? `,"deltaText":${json(event.deltaText)}${event.replace ? ',"replace":true' : ''}`
        : '';
      return {
        event: 'chat',
        payloadJson: `${runHead(run)},"seq":${numberJson(run.seq)},"state":"delta"${deltaText},"message":${chatMessageJson(event.text, run.ts)}}`,
        droppable: !v4,
      };
    }
    case 'chat-end': {
      const message =
        event.state !== 'error' || event.text ? `,"message":${chatMessageJson(event.text, run.ts)}` : '';
      const error =
        event.errorMessage !== undefined
          ? `${optionalString('errorMessage', event.errorMessage)}${optionalString('errorKind', event.errorKind)}`
          : '';
      return {
        event: 'chat',
        payloadJson: `${runHead(run)},"seq":${numberJson(run.seq)},"state":${json(event.state)}${optionalString('stopReason', event.stopReason)}${message}${error}}`,
      };
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
