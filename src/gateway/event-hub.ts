import type { Bus, BusEvent, RunStatus } from '../bus/index.js';
import type { Clock, Logger } from '../util/index.js';
import { ErrorCodes } from '../util/index.js';
import type { ForwardedEvent, MethodTable } from './method-table.js';
import { scopeSatisfied } from './scopes.js';

/** Where a run event belongs; `seq` counts the run's own events (OpenClaw's `payload.seq`). */
export interface RunRef {
  runId: string;
  sessionKey: string | undefined;
  agentId: string | undefined;
  seq: number;
  ts: number;
}

/** Run events in a protocol-neutral form; each adapter turns them into its own frames. */
export type RunWireEvent =
  | { kind: 'lifecycle'; run: RunRef; phase: 'start'; startedAt: number; model: string }
  | {
      kind: 'lifecycle';
      run: RunRef;
      phase: 'end' | 'error';
      startedAt: number;
      endedAt: number;
      status: RunStatus;
      stopReason: string;
      error?: { code: string; message: string; retryable: boolean };
    }
  | { kind: 'assistant'; run: RunRef; text: string; delta: string }
  /** A throttled chat delta: `text` is cumulative, `deltaText` the increment (or the replacement when `replace`). */
  | { kind: 'chat-delta'; run: RunRef; text: string; deltaText: string; replace: boolean }
  | {
      kind: 'chat-end';
      run: RunRef;
      state: 'final' | 'aborted' | 'error';
      text: string;
      stopReason: string;
      errorMessage?: string;
      errorKind?: string;
    }
  | {
      kind: 'tool';
      run: RunRef;
      phase: 'start' | 'end';
      toolCallId: string;
      toolName: string;
      args?: Record<string, unknown>;
      isError?: boolean;
      durationMs?: number;
    };

/**
 * A session's index entry changed: a run started or ended in it, or a client reset, created, patched or
 * deleted it. OpenClaw clients hear it as `sessions.changed` after `sessions.subscribe`.
 */
export interface SessionChange {
  sessionKey: string;
  agentId: string | undefined;
  reason: 'run' | 'new' | 'reset' | 'create' | 'patch' | 'delete';
  /** For run changes: `start`, or how it ended. */
  phase?: 'start' | 'end' | 'error';
  runId?: string;
  sessionId?: string;
  ts: number;
}

/** A connection as the hub sees it. */
export interface EventSink {
  readonly connId: string;
  readonly scopes: ReadonlyArray<string>;
  onRunEvent(event: RunWireEvent): void;
  onForwardedEvent(entry: ForwardedEvent, event: BusEvent): void;
  /** Only called for sinks subscribed with `subscribeSessions`. */
  onSessionChange?(change: SessionChange): void;
}

export interface EventHub {
  attach(sink: EventSink): void;
  /**
   * Subscribes a sink to one session's run and session-scoped events. A sink watches at most
   * `maxWatchedSessions` sessions: watching one more drops the one it watched (or watched again) longest ago.
   */
  watch(sink: EventSink, sessionKey: string): void;
  /** Turns a sink's session-index subscription on or off (every session, not only watched ones). */
  subscribeSessions(sink: EventSink, on: boolean): void;
  /** Tells session-index subscribers that a session changed outside a run (reset, create, patch, delete). */
  sessionChanged(change: Omit<SessionChange, 'ts'>): void;
  detach(sink: EventSink): void;
  close(): void;
  /** Runs currently tracked (started, not finished). */
  readonly activeRuns: number;
  readonly sinkCount: number;
  /** Session watches of every sink together. */
  readonly watchCount: number;
}

/**
 * The most sessions one connection watches. Every `chat.history`, `chat.inject`, `chat.send` and `agent`
 * watches its session and nothing unwatches one before the connection closes, so without a bound a client
 * could make the hub index any number of session keys. A TUI watches a handful; a dashboard, the sessions
 * it has opened.
 */
export const maxWatchedSessionsPerSink = 1_000;

interface RunState {
  runId: string;
  sessionKey: string | undefined;
  agentId: string | undefined;
  startedAt: number;
  seq: number;
  text: string;
  lastChatText: string;
  lastChatAt: number;
  chatTimer: ReturnType<typeof setTimeout> | undefined;
}

/** The gateway relays chat deltas at most this often per run, like OpenClaw does. */
const chatDeltaIntervalMs = 150;

const runEventTypeList = [
  'run:started',
  'run:text-delta',
  'run:tool-started',
  'run:tool-finished',
  'run:finished',
] as const;
type RunBusEvent = BusEvent<(typeof runEventTypeList)[number]>;
const runEventTypes = new Set<string>(runEventTypeList);
const isRunEvent = (event: BusEvent): event is RunBusEvent => runEventTypes.has(event.type);

const readScope = 'operator.read';

function errorKindOf(code: string | undefined): string {
  switch (code) {
    case ErrorCodes.providerTimeout:
    case ErrorCodes.timeout:
      return 'timeout';
    case ErrorCodes.providerRateLimited:
      return 'rate_limit';
    default:
      return 'unknown';
  }
}

/**
 * Subscribes to the bus once and fans events out to the connections that care: run events go to sinks
 * watching the run's session, forwarded events with a session go to that session's watchers, and forwarded
 * events without one go to every sink with the right scope. Connections are indexed by session so one event
 * costs work proportional to its audience, not to the number of connections.
 */
export function createEventHub(options: {
  bus: Bus;
  table: MethodTable;
  clock: Clock;
  logger: Logger;
  /** Sessions one sink watches at most (default `maxWatchedSessionsPerSink`). */
  maxWatchedSessions?: number;
}): EventHub {
  const { bus, table, clock, logger } = options;
  const maxWatchedSessions = options.maxWatchedSessions ?? maxWatchedSessionsPerSink;
  const sinks = new Set<EventSink>();
  const bySession = new Map<string, Set<EventSink>>();
  /** Each sink's watched sessions, the one watched longest ago first. */
  const watchedBy = new Map<EventSink, Set<string>>();
  let watchCount = 0;
  const sessionSubscribers = new Set<EventSink>();
  const runs = new Map<string, RunState>();
  let forwardIndex = new Map<string, ForwardedEvent[]>();
  let forwardIndexSize = -1;

  const forwardsFor = (type: string): ForwardedEvent[] | undefined => {
    const entries = table.forwardedEvents();
    if (entries.length !== forwardIndexSize) {
      forwardIndex = new Map();
      for (const entry of entries) {
        const list = forwardIndex.get(entry.busType) ?? [];
        list.push(entry);
        forwardIndex.set(entry.busType, list);
      }
      forwardIndexSize = entries.length;
    }
    return forwardIndex.get(type);
  };

  const deliver = (
    sessionKey: string | undefined,
    scopes: ReadonlyArray<string>,
    send: (sink: EventSink) => void,
  ) => {
    const audience = sessionKey === undefined ? sinks : bySession.get(sessionKey);
    if (!audience) return;
    for (const sink of audience) {
      if (!scopes.every((scope) => scopeSatisfied(scope, sink.scopes))) continue;
      try {
        send(sink);
      } catch (error) {
        logger.error({ err: error, connId: sink.connId }, 'gateway: delivering an event failed');
      }
    }
  };

  /** Takes `sink` out of `sessionKey`'s watchers (its own set of keys is the caller's). */
  const unwatch = (sink: EventSink, sessionKey: string) => {
    watchCount--;
    const watchers = bySession.get(sessionKey);
    watchers?.delete(sink);
    if (watchers?.size === 0) bySession.delete(sessionKey);
  };

  const notifySessions = (change: SessionChange) => {
    for (const sink of sessionSubscribers) {
      if (!scopeSatisfied(readScope, sink.scopes)) continue;
      try {
        sink.onSessionChange?.(change);
      } catch (error) {
        logger.error({ err: error, connId: sink.connId }, 'gateway: delivering a session change failed');
      }
    }
  };

  const emitRun = (run: RunState, build: (ref: RunRef) => RunWireEvent, bumpSeq = true) => {
    if (bumpSeq) run.seq++;
    const event = build({
      runId: run.runId,
      sessionKey: run.sessionKey,
      agentId: run.agentId,
      seq: run.seq,
      ts: clock.now(),
    });
    deliver(run.sessionKey, [readScope], (sink) => sink.onRunEvent(event));
  };

  const flushChatDelta = (run: RunState) => {
    if (run.chatTimer) {
      clearTimeout(run.chatTimer);
      run.chatTimer = undefined;
    }
    if (run.text === run.lastChatText) return;
    const extends_ = run.text.startsWith(run.lastChatText);
    const deltaText = extends_ ? run.text.slice(run.lastChatText.length) : run.text;
    run.lastChatText = run.text;
    run.lastChatAt = clock.now();
    emitRun(
      run,
      (ref) => ({ kind: 'chat-delta', run: ref, text: run.text, deltaText, replace: !extends_ }),
      false,
    );
  };

  const runFor = (event: RunBusEvent): RunState => {
    const { runId } = event.data;
    let run = runs.get(runId);
    if (!run) {
      run = {
        runId,
        sessionKey: event.sessionKey,
        agentId: event.agentId,
        startedAt: event.at,
        seq: 0,
        text: '',
        lastChatText: '',
        lastChatAt: 0,
        chatTimer: undefined,
      };
      runs.set(runId, run);
    }
    return run;
  };

  const onRunEvent = (event: RunBusEvent) => {
    switch (event.type) {
      case 'run:started': {
        const { data } = event;
        const run = runFor(event);
        run.sessionKey = data.sessionKey ?? run.sessionKey;
        run.agentId = data.agentId;
        run.startedAt = event.at;
        emitRun(run, (ref) => ({
          kind: 'lifecycle',
          run: ref,
          phase: 'start',
          startedAt: event.at,
          model: data.model,
        }));
        if (run.sessionKey !== undefined) {
          notifySessions({
            sessionKey: run.sessionKey,
            agentId: run.agentId,
            reason: 'run',
            phase: 'start',
            runId: run.runId,
            ts: event.at,
          });
        }
        return;
      }
      case 'run:text-delta': {
        const { data } = event;
        const run = runFor(event);
        run.text = data.text;
        emitRun(run, (ref) => ({ kind: 'assistant', run: ref, text: data.text, delta: data.delta }));
        const sinceLast = clock.now() - run.lastChatAt;
        if (sinceLast >= chatDeltaIntervalMs) flushChatDelta(run);
        else if (!run.chatTimer) {
          run.chatTimer = setTimeout(() => {
            run.chatTimer = undefined;
            flushChatDelta(run);
          }, chatDeltaIntervalMs - sinceLast);
          run.chatTimer.unref?.();
        }
        return;
      }
      case 'run:tool-started': {
        const { data } = event;
        emitRun(runFor(event), (ref) => ({
          kind: 'tool',
          run: ref,
          phase: 'start',
          toolCallId: data.toolCallId,
          toolName: data.toolName,
          args: data.arguments,
        }));
        return;
      }
      case 'run:tool-finished': {
        const { data } = event;
        emitRun(runFor(event), (ref) => ({
          kind: 'tool',
          run: ref,
          phase: 'end',
          toolCallId: data.toolCallId,
          toolName: data.toolName,
          isError: data.isError,
          durationMs: data.durationMs,
        }));
        return;
      }
      case 'run:finished': {
        const { data } = event;
        const run = runFor(event);
        runs.delete(run.runId);
        const stopReason = data.status === 'completed' ? 'stop' : data.status;
        emitRun(run, (ref) => ({
          kind: 'lifecycle',
          run: ref,
          phase: data.status === 'error' ? 'error' : 'end',
          startedAt: run.startedAt,
          endedAt: event.at,
          status: data.status,
          stopReason,
          ...(data.error ? { error: data.error } : {}),
        }));
        // The final text is authoritative: after tool turns it may not extend what was streamed.
        if (data.status !== 'error' && data.text) run.text = data.text;
        flushChatDelta(run);
        const state = data.status === 'aborted' ? 'aborted' : data.status === 'error' ? 'error' : 'final';
        emitRun(
          run,
          (ref) => ({
            kind: 'chat-end',
            run: ref,
            state,
            text: run.text,
            stopReason,
            ...(state === 'error'
              ? {
                  errorMessage: data.error?.message ?? 'run failed',
                  errorKind: errorKindOf(data.error?.code),
                }
              : {}),
          }),
          false,
        );
        if (run.sessionKey !== undefined) {
          notifySessions({
            sessionKey: run.sessionKey,
            agentId: run.agentId,
            reason: 'run',
            phase: data.status === 'error' ? 'error' : 'end',
            runId: run.runId,
            ts: event.at,
          });
        }
        return;
      }
    }
  };

  const unsubscribe = bus.subscribe({}, (event) => {
    if (isRunEvent(event)) onRunEvent(event);
    const forwards = forwardsFor(event.type);
    if (!forwards) return;
    for (const entry of forwards) {
      if (entry.include && !entry.include(event)) continue;
      deliver(event.sessionKey, entry.scopes, (sink) => sink.onForwardedEvent(entry, event));
    }
  });

  return {
    attach(sink) {
      sinks.add(sink);
    },
    watch(sink, sessionKey) {
      if (!sinks.has(sink)) return;
      let keys = watchedBy.get(sink);
      if (!keys) {
        keys = new Set();
        watchedBy.set(sink, keys);
      }
      if (keys.has(sessionKey)) {
        // Watched again: it becomes the most recent, the last one a new watch would drop.
        keys.delete(sessionKey);
        keys.add(sessionKey);
        return;
      }
      if (keys.size >= maxWatchedSessions) {
        const oldest = keys.values().next().value as string;
        keys.delete(oldest);
        unwatch(sink, oldest);
        logger.debug(
          { connId: sink.connId, sessionKey: oldest },
          'gateway: dropped the oldest session watch',
        );
      }
      keys.add(sessionKey);
      watchCount++;
      let watchers = bySession.get(sessionKey);
      if (!watchers) {
        watchers = new Set();
        bySession.set(sessionKey, watchers);
      }
      watchers.add(sink);
    },
    subscribeSessions(sink, on) {
      if (on && sinks.has(sink)) sessionSubscribers.add(sink);
      else sessionSubscribers.delete(sink);
    },
    sessionChanged(change) {
      notifySessions({ ...change, ts: clock.now() });
    },
    detach(sink) {
      sinks.delete(sink);
      sessionSubscribers.delete(sink);
      for (const key of watchedBy.get(sink) ?? []) unwatch(sink, key);
      watchedBy.delete(sink);
    },
    close() {
      unsubscribe();
      for (const run of runs.values()) if (run.chatTimer) clearTimeout(run.chatTimer);
      runs.clear();
      sinks.clear();
      sessionSubscribers.clear();
      bySession.clear();
      watchedBy.clear();
      watchCount = 0;
    },
    get activeRuns() {
      return runs.size;
    },
    get sinkCount() {
      return sinks.size;
    },
    get watchCount() {
      return watchCount;
    },
  };
}
