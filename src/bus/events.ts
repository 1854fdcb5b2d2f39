/**
 * The typed event map. Each subsystem adds its own events by declaration merging in its own folder:
 *
 * ```ts
 * declare module '../bus/index.js' {
 *   interface BusEventMap {
 *     'work:claimed': { workItemId: string; workerId: string };
 *   }
 * }
 * ```
 *
 * Keys are `<subsystem>:<what-happened>` in kebab-case. Payloads are plain JSON data (they are persisted
 * and sent over the wire) and never carry secrets.
 */
// biome-ignore lint/suspicious/noEmptyInterface: extended by declaration merging
export interface BusEventMap {
  /** A subsystem hit an error worth telling operators and clients about. */
  'system:error': { code: string; message: string; component: string };
  /** The store could not be opened and agentd runs with RAM only. */
  'store:degraded': { reason: string; path?: string };
}

export type BusEventType = keyof BusEventMap & string;

/** Routing context carried by every event, used by subscription filters and the audit log. */
export interface BusEventScope {
  sessionKey?: string;
  agentId?: string;
  workItemId?: string;
  runId?: string;
}

export interface BusEvent<K extends BusEventType = BusEventType> extends BusEventScope {
  type: K;
  /** Process-local monotonically increasing sequence number. */
  seq: number;
  /** Epoch milliseconds. */
  at: number;
  data: BusEventMap[K];
}
