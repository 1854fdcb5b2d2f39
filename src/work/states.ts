import { AgentdError, ErrorCodes } from '../util/index.js';

/**
 * Work item states. The life of an item:
 *
 * ```
 * queued → claimed → running → completed | failed | cancelled
 * failed → queued (retry after backoff) | dead (attempts exhausted)
 * claimed | running → queued            (lease expired or released: the work runs again)
 * running → blocked                      (lease expired while awaiting children; re-queued when they end)
 * queued | blocked | claimed | running ⇄ paused
 * (submission) → merged                  (dedup: a live item with the same kind and dedup key exists)
 * ```
 */
export const workStates = [
  'queued',
  'claimed',
  'running',
  'completed',
  'failed',
  'dead',
  'cancelled',
  'blocked',
  'paused',
  'merged',
] as const;

export type WorkState = (typeof workStates)[number];

/** States an item never leaves. `failed` is terminal: a retryable failure goes straight on to `queued`. */
export const terminalWorkStates: ReadonlySet<WorkState> = new Set([
  'completed',
  'failed',
  'dead',
  'cancelled',
  'merged',
]);

/** States in which a dedup key is held, so a new submission with that key merges into the item. */
export const liveWorkStates: ReadonlyArray<WorkState> = ['queued', 'claimed', 'running', 'blocked', 'paused'];

const transitions: Readonly<Record<WorkState, ReadonlyArray<WorkState>>> = {
  queued: ['claimed', 'cancelled', 'paused', 'blocked'],
  claimed: ['running', 'queued', 'failed', 'cancelled', 'paused', 'dead'],
  running: ['completed', 'failed', 'cancelled', 'queued', 'blocked', 'paused', 'dead'],
  failed: ['queued', 'dead'],
  blocked: ['queued', 'cancelled', 'paused'],
  paused: ['queued', 'cancelled'],
  completed: [],
  dead: [],
  cancelled: [],
  merged: [],
};

export function canTransition(from: WorkState, to: WorkState): boolean {
  return transitions[from].includes(to);
}

/** The states from which `to` may be entered; used to build guarded `UPDATE … WHERE state IN (…)`. */
export function statesThatCanEnter(to: WorkState): WorkState[] {
  return workStates.filter((from) => transitions[from].includes(to));
}

export function isTerminalWorkState(state: WorkState): boolean {
  return terminalWorkStates.has(state);
}

/** Stable error codes of the work subsystem (documented in docs/work.md). */
export const WorkErrorCodes = {
  invalidTransition: 'INVALID_TRANSITION',
  leaseExpired: 'LEASE_EXPIRED',
  depthLimit: 'DEPTH_LIMIT',
  fanOutLimit: 'FAN_OUT_LIMIT',
  childWorkTimeout: 'CHILD_WORK_TIMEOUT',
  /** A failed item whose outcome carries no error (written by an older version or another process). */
  noErrorRecorded: 'UNKNOWN',
  notFound: ErrorCodes.notFound,
  queueFull: ErrorCodes.queueFull,
} as const;

/**
 * The queue's answer to a change of an item that moved on between the caller's read and the change (it
 * ended, or was cancelled with its parent) or is gone: nothing left to change, not a failure.
 */
export function itemMovedOn(error: unknown): boolean {
  return (
    AgentdError.isInstance(error) &&
    (error.code === WorkErrorCodes.invalidTransition || error.code === WorkErrorCodes.notFound)
  );
}
