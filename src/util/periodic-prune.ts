import { type Clock, systemClock } from './clock.js';
import { type Logger, silentLogger } from './logger.js';
import { isStoreUnavailable } from './retry.js';

/** Taken at load: a test's fake timers must not hold a prune between two of its batches. */
const afterIo = globalThis.setImmediate;

/** Lets what waits on the event loop (chat turns, the writers) run between two batches of a prune. */
const yieldToIo = (): Promise<void> => new Promise((resume) => afterIo(resume));

/** One batch of a prune: the rows it deleted, and where the next batch starts; no `next` after the last. */
export interface PruneBatch<Cursor> {
  deleted: number;
  next: Cursor | undefined;
}

/**
 * Runs a prune's batches from `start` until one answers no `next` or `stopping()` turns true, and lets what
 * waits on the event loop (chat turns, claims, the writers of the table) run between two: each batch is a
 * commit of its own, so the write lock, and on SQLite the event loop, is held for one batch at a time.
 * Resolves with the rows the batches deleted.
 */
export async function deleteInBatches<Cursor>(
  start: Cursor,
  batch: (cursor: Cursor) => Promise<PruneBatch<Cursor>>,
  stopping: () => boolean,
): Promise<number> {
  let deleted = 0;
  let cursor: Cursor | undefined = start;
  while (cursor !== undefined && !stopping()) {
    const done: PruneBatch<Cursor> = await batch(cursor);
    deleted += done.deleted;
    cursor = done.next;
    if (cursor !== undefined) await yieldToIo();
  }
  return deleted;
}

/** The options every retention built on `createPeriodicPrune` takes besides what it prunes. */
export interface RetentionScheduleOptions {
  /** Time from the end of one prune to the start of the next (default an hour). */
  intervalMs?: number | undefined;
  /** The clock the table's times were written with: a prune's cutoff is compared with them. */
  clock?: Clock | undefined;
  logger?: Logger | undefined;
}

export interface PeriodicPruneOptions<T> {
  /** False when the configuration keeps everything: `start` then starts nothing. */
  enabled: boolean;
  /**
   * One prune, batch by batch, at `now` by the schedule's clock; `stopping()` turns true when `stop` is called,
   * to end after the batch.
   */
  prune(stopping: () => boolean, now: number): Promise<T>;
  /** The fields of the log line of a prune that removed something; undefined when it removed nothing. */
  logFields(result: T): Record<string, unknown> | undefined;
  /** What is pruned, as the log lines say it: "the audit log". */
  what: string;
  /** The log lines' verb, for a periodic job that changes rows rather than deleting them (default prune). */
  verb?: { base: string; past: string };
  /** The subsystem whose table it is, the `component` of the log lines. */
  component: string;
}

const hourMs = 60 * 60 * 1000;

export interface PeriodicPrune<T> {
  /** Prunes now, then `intervalMs` after each prune ends; nothing when not `enabled`. */
  start(): void;
  /** Prunes now; while a prune runs, resolves with that one. */
  prune(): Promise<T>;
  /** Stops the timer and waits for a running prune, which ends after its current batch. */
  stop(): Promise<void>;
}

/**
 * Runs a prune of a growing table at start and then periodically. The next prune is timed from the end of the
 * last, so a long first prune after an upgrade never overlaps the next. A prune the database refuses (a full
 * disk can refuse a DELETE too, a lost connection) or that fails otherwise is logged and tried again at the
 * next one: pruning must never stop what writes the table.
 */
export function createPeriodicPrune<T>(
  schedule: RetentionScheduleOptions,
  options: PeriodicPruneOptions<T>,
): PeriodicPrune<T> {
  const { what } = options;
  const verb = options.verb ?? { base: 'prune', past: 'pruned' };
  const clock = schedule.clock ?? systemClock;
  const logger = (schedule.logger ?? silentLogger).child({ component: options.component });
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<T> | undefined;
  let started = false;
  let stopped = false;

  const prune = (): Promise<T> => {
    running ??= options
      .prune(() => stopped, clock.now())
      .finally(() => {
        running = undefined;
      });
    return running;
  };

  const pruneAndLog = async (): Promise<void> => {
    try {
      const fields = options.logFields(await prune());
      if (fields) logger.info(fields, `${verb.past} ${what}`);
    } catch (error) {
      const message = `could not ${verb.base} ${what}; trying again at the next ${verb.base}`;
      if (isStoreUnavailable(error)) logger.warn({ err: error }, message);
      else logger.error({ err: error }, message);
    }
  };

  const pruneThenWait = async (): Promise<void> => {
    await pruneAndLog();
    if (stopped) return;
    timer = setTimeout(pruneThenWait, schedule.intervalMs ?? hourMs);
    timer.unref();
  };

  return {
    start() {
      if (!options.enabled || started || stopped) return;
      started = true;
      void pruneThenWait();
    },
    prune,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
      await running?.catch(() => undefined);
    },
  };
}
