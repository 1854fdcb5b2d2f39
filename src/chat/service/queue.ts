import { ErrorCodes, StringDictionary, UserInputError } from '../../util/index.js';

/** Defaults of `chat.maxQueuedTurnsPerSession` and `chat.maxQueuedTurns` (docs/configuration.md). */
export const defaultMaxQueuedTurnsPerSession = 32;
export const defaultMaxQueuedTurns = 1_000;

/**
 * A turn counted as queued: from its admission until its turn starts in the session's lane. `release` is
 * idempotent.
 */
export class QueueSlot {
  #released = false;

  constructor(
    private readonly queue: TurnQueue,
    readonly sessionKey: string,
  ) {}

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.queue.release(this.sessionKey);
  }
}

/**
 * Turns accepted but not started yet, per session key and in all: each holds its message in RAM (the lane's
 * closure) and, while it waits, a row in the durable inbox. A message that would wait behind a turn of its
 * session is refused with QUEUE_FULL past either bound, before anything is written.
 */
export class TurnQueue {
  readonly maxPerSession: number;
  readonly maxTotal: number;
  /** Called after a slot was released (a queued turn started, or was never stored). */
  onRelease: ((sessionKey: string) => void) | undefined;
  readonly #bySession = new StringDictionary<number>();
  #total = 0;

  constructor(limits: { maxPerSession: number; maxTotal: number }) {
    this.maxPerSession = limits.maxPerSession;
    this.maxTotal = limits.maxTotal;
  }

  /** Turns queued in all. */
  get size(): number {
    return this.#total;
  }

  queuedFor(sessionKey: string): number {
    return this.#bySession.get(sessionKey) ?? 0;
  }

  hasRoom(sessionKey: string): boolean {
    return this.queuedFor(sessionKey) < this.maxPerSession && this.#total < this.maxTotal;
  }

  /** Counts a turn as queued, whatever the bounds (a turn its idle session starts at once). */
  reserve(sessionKey: string): QueueSlot {
    this.#bySession.set(sessionKey, this.queuedFor(sessionKey) + 1);
    this.#total++;
    return new QueueSlot(this, sessionKey);
  }

  /**
   * Counts a turn that will wait, or refuses it with QUEUE_FULL (retryable) naming the bound it reached.
   * Synchronous, so concurrent sends cannot all pass the check before any is counted.
   */
  admit(sessionKey: string): QueueSlot {
    const forSession = this.queuedFor(sessionKey);
    if (forSession >= this.maxPerSession) {
      throw new UserInputError({
        code: ErrorCodes.queueFull,
        message: `${forSession} messages already wait for session ${sessionKey} (chat.maxQueuedTurnsPerSession is ${this.maxPerSession}); send again when its turns finish, or /stop them.`,
        retryable: true,
        details: { sessionKey, queued: forSession, limit: this.maxPerSession, bound: 'session' },
      });
    }
    if (this.#total >= this.maxTotal) {
      throw new UserInputError({
        code: ErrorCodes.queueFull,
        message: `${this.#total} chat messages already wait across all sessions (chat.maxQueuedTurns is ${this.maxTotal}); send again when turns finish.`,
        retryable: true,
        details: { queued: this.#total, limit: this.maxTotal, bound: 'total' },
      });
    }
    return this.reserve(sessionKey);
  }

  /** Through `QueueSlot.release`, once per slot. */
  release(sessionKey: string): void {
    const left = this.queuedFor(sessionKey) - 1;
    if (left > 0) this.#bySession.set(sessionKey, left);
    else this.#bySession.delete(sessionKey);
    this.#total = Math.max(0, this.#total - 1);
    this.onRelease?.(sessionKey);
  }
}
