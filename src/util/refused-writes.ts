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
  /** Disarms the retry: the owner is closing, and tries (or gives up) itself. */
  stop(): void;
}

export function createRefusedWrites<Write>(options: RefusedWritesOptions): RefusedWrites<Write> {
  const { logger, what } = options;
  let kept: Write[] = [];
  let retryMs = options.firstRetryMs;
  let timer: ReturnType<typeof setTimeout> | undefined;
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
        { err: error, writes: kept.length, retryMs },
        `the database refused ${what} for now; writing it again later`,
      );
      if (timer) return;
      timer = setTimeout(() => {
        timer = undefined;
        options.retry();
      }, retryMs);
      timer.unref?.();
      retryMs = Math.min(retryMs * 2, options.maxRetryMs);
    },
    written() {
      retryMs = options.firstRetryMs;
    },
    get kept() {
      return kept.length;
    },
    stop() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
