/**
 * The typed event map. Each subsystem adds its own events by declaration merging in its own folder:
 *
 * ```ts
 * declare module '../bus/events.js' {
 *   interface BusEventMap {
 *     'work:claimed': { workItemId: string; workerId: string };
 *   }
 * }
 * ```
 *
 * Keys are `<subsystem>:<what-happened>` in kebab-case. Payloads are plain JSON data (they are persisted
 * and sent over the wire) and never carry secrets.
 */
export interface BusEventMap {
  /** A subsystem hit an error worth telling operators and clients about. */
  'system:error': { code: string; message: string; component: string };
  /** The store could not be opened and agentd runs with RAM only. */
  'store:degraded': { reason: string; path?: string };

  // Agent runs (one engage-loop execution). Shared by the engage loop (publisher), the gateway (streams them
  // to clients as OpenClaw `agent`/`chat` events and Spiderweb deltas) and telemetry.
  'run:started': { runId: string; sessionKey?: string; agentId: string; workItemId?: string; model: string };
  /** `delta` is the new text; `text` is the cumulative assistant text of the current model turn. */
  'run:text-delta': { runId: string; delta: string; text: string };
  'run:tool-started': {
    runId: string;
    toolCallId: string;
    toolName: string;
    arguments: Record<string, unknown>;
  };
  /** `result` is truncated for the bus (full results stay in the transcript). */
  'run:tool-finished': {
    runId: string;
    toolCallId: string;
    toolName: string;
    isError: boolean;
    result: string;
    durationMs: number;
  };
  'run:finished': {
    runId: string;
    status: RunStatus;
    /** Final assistant text of the run. */
    text: string;
    error?: { code: string; message: string; retryable: boolean };
    usage: { inputTokens: number; outputTokens: number; costUsd?: number };
    turns: number;
  };
}

/** How a run ended. `max_turns`, `budget_exceeded` and `blocked` are clean stops, not crashes. */
export type RunStatus = 'completed' | 'aborted' | 'error' | 'max_turns' | 'budget_exceeded' | 'blocked';

/** The name of an event, `<subsystem>:<what-happened>` (a key of `BusEventMap`). */
export type BusEventType = keyof BusEventMap & string;

/** Routing context carried by every event, used by subscription filters and the audit log. */
export interface BusEventScope {
  sessionKey?: string;
  agentId?: string;
  workItemId?: string;
  runId?: string;
}

/** One published event of the type `K`: its payload (`data`), routing scope and position (`seq`, `at`). */
interface BusEventOf<K extends BusEventType> extends BusEventScope {
  type: K;
  /** Process-local monotonically increasing sequence number. */
  seq: number;
  /** Epoch milliseconds. */
  at: number;
  data: BusEventMap[K];
}

/**
 * A bus event. Without a type argument it is the union of every event correlated by `type`, so a handler
 * narrows `data` with `if (event.type === 'run:finished')` or a `switch`, without casts.
 */
export type BusEvent<K extends BusEventType = BusEventType> = { [P in K]: BusEventOf<P> }[K];
