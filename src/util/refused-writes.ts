import { createBackoffTimer } from './backoff.js';
import type { Logger } from './logger.js';

export interface RefusedWritesOptions {
  /** Called when the retry delay has passed: the owner writes again (`withKept` gives it what was kept). */
  retry(): void;
  /** The first wait before `retry`; each next one doubles, up to `maxRetryMs`, until a write goes through. */
  firstRetryMs: number;
  maxRetryMs: number;
  /** Writes kept at most; past it the oldest are dropped, and said so. */
  maxKept: number;
  logger: Logger;
  /** What the writes are, for the log lines ("agent state", "audit events"). */
  what: string;
}

/**
 * What the database refused for now (a full disk, a lost connection), kept in order until it takes them:
 * a writer that batches in the background, with no caller waiting to be told of the failure, hands a
 * refused batch here instead of dropping it, and puts what was kept ahead of its next batch.
 */
export interface RefusedWrites<Write> {
  /** What was kept, then `batch`: what the next attempt writes, in order. What was kept is handed over. */
  withKept(batch: Write[]): Write[];
  /** `writes` (the refused one and every one after it) were refused for now: kept, and a retry armed. */
  refuse(writes: Write[], error: unknown): void;
  /** A batch went through: the next refusal waits `firstRetryMs` again. */
  written(): void;
  /** How many writes are kept. */
  readonly kept: number;
  /** Arms no more retries: the owner is closing, and makes its last try itself. */
  stop(): void;
  /** After the owner's last try: what is still kept is lost, and the log says how much. */
  giveUp(): void;
}

export function createRefusedWrites<Write>(options: RefusedWritesOptions): RefusedWrites<Write> {
  const { logger, what } = options;
  let kept: Write[] = [];
  const retry = createBackoffTimer({
    firstDelayMs: options.firstRetryMs,
    maxDelayMs: options.maxRetryMs,
    run: options.retry,
  });
  return {
    withKept(batch) {
      if (kept.length === 0) return batch;
      const writes = kept.concat(batch);
      kept = [];
      return writes;
    },
    refuse(writes, error) {
      kept = writes;
      if (kept.length > options.maxKept) {
        const dropped = kept.length - options.maxKept;
        kept = kept.slice(dropped);
        logger.error({ writes: dropped }, `${what} refused for too long: its oldest writes are dropped`);
      }
      logger.warn(
        { err: error, writes: kept.length, retryMs: retry.delayMs },
        `the database refused ${what} for now; writing it again later`,
      );
      retry.arm();
    },
    written() {
      retry.reset();
    },
    get kept() {
      return kept.length;
    },
    stop() {
      retry.stop();
    },
    giveUp() {
      if (kept.length === 0) return;
      logger.error(
        { lost: kept.length },
        `the database still refuses ${what} at close; these writes are lost`,
      );
      kept = [];
    },
  };
}
