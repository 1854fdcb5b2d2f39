import { type Clock, sleep, systemClock } from './clock.js';
import { AgentdError, ErrorCodes } from './errors.js';
import { type AbortSource, signalOf } from './lazy-abort.js';

/** A database that cannot be reached or written now (`STORE_UNAVAILABLE`): worth trying again later. */
export function isStoreUnavailable(error: unknown): error is AgentdError {
  return AgentdError.isInstance(error) && error.code === ErrorCodes.storeUnavailable;
}

export interface RetryOptions {
  /** The first wait; each next one doubles, up to `maxDelayMs`. */
  firstDelayMs: number;
  maxDelayMs: number;
  /** No wait that would end later than this long after the first attempt: the failure is thrown instead. */
  forMs: number;
  /** Whether this failure may be tried again. */
  retryable(error: unknown): boolean;
  /** Told of each failure about to be tried again (to log it). */
  onRetry?(error: unknown, delayMs: number): void;
  /**
   * Ends a wait at once: the promise rejects with the signal's reason. A lazy controller's signal is made only
   * for a wait.
   */
  signal?: AbortSource;
  clock?: Clock;
  /** Waits between attempts (default `sleep`); a store that a test's fake timers must not hold passes its own. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** Runs `attempt` until it settles other than with a retryable failure, or the time allowed is up. */
export async function retrying<T>(attempt: () => Promise<T>, options: RetryOptions): Promise<T> {
  const clock = options.clock ?? systemClock;
  const until = clock.now() + options.forMs;
  let delayMs = options.firstDelayMs;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (!options.retryable(error) || clock.now() + delayMs > until) throw error;
      options.onRetry?.(error, delayMs);
      await (options.sleep ?? sleep)(delayMs, options.signal && signalOf(options.signal));
      delayMs = Math.min(delayMs * 2, options.maxDelayMs);
    }
  }
}
