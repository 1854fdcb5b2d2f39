import { z } from 'zod';
import type { Clock, Logger } from '../util/index.js';
import { isStoreUnavailable, silentLogger, systemClock } from '../util/index.js';
import type { EventStore } from './event-store.js';

/** The `audit:` section of agentd.yaml: how long the audit log (`events`) keeps what it recorded. */
export const auditConfigSchema = z
  .object({
    /** Days an event is kept (fractions allowed); 0 keeps every event forever. */
    retainDays: z.number().nonnegative().default(30),
  })
  .strict();

export type AuditConfig = z.infer<typeof auditConfigSchema>;

export interface EventRetentionOptions {
  events: EventStore;
  /** Events written longer ago than this are deleted; 0 keeps them all. */
  retainMs: number;
  /** Time from the end of one prune to the start of the next (default an hour). */
  intervalMs?: number;
  /**
   * Most rows one DELETE removes (default 1,000). Each is a transaction of its own, so the write lock is
   * held for one batch at a time; on SQLite a batch also runs on the event loop, a pause for the chat turn
   * that arrives meanwhile: 1,000 rows of a chat server's shape took about 2 ms, 5,000 about 25.
   */
  batchRows?: number;
  clock?: Clock;
  logger?: Logger;
}

export interface EventRetention {
  /** Prunes now, then every `intervalMs`; a retention of 0 starts nothing. */
  start(): void;
  /** Deletes the events older than the retention, batch by batch; resolves with how many went. */
  prune(): Promise<number>;
  /** Stops the timer and waits for a running prune, which ends after its current batch. */
  stop(): Promise<void>;
}

const hourMs = 60 * 60 * 1000;
/** Taken at load: a test's fake timers must not hold a prune between two of its batches. */
const afterIo = globalThis.setImmediate;

/**
 * Keeps the audit log from growing without bound: every recorded bus event is a row, and nothing else ever
 * deletes one. A prune the database refuses (a full disk can refuse a DELETE too, a lost connection) is
 * logged and tried again at the next one; the recorder goes on writing meanwhile.
 */
export function createEventRetention(options: EventRetentionOptions): EventRetention {
  const logger = (options.logger ?? silentLogger).child({ component: 'store' });
  const clock = options.clock ?? systemClock;
  const intervalMs = options.intervalMs ?? hourMs;
  const batchRows = options.batchRows ?? 1_000;
  const keepsAll = options.retainMs <= 0;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<number> | undefined;
  let started = false;
  let stopped = false;

  const pruneInBatches = async (): Promise<number> => {
    const before = clock.now() - options.retainMs;
    let deleted = 0;
    let fromId: number | undefined = 0;
    while (fromId !== undefined && !stopped) {
      const step = await options.events.deleteOlderThan(before, { fromId, maxRows: batchRows });
      deleted += step.deleted;
      fromId = step.nextFromId;
      // Chat turns and the recorder's own writes go between two batches.
      if (fromId !== undefined) await new Promise((resume) => afterIo(resume));
    }
    return deleted;
  };

  const prune = (): Promise<number> => {
    if (keepsAll) return Promise.resolve(0);
    running ??= pruneInBatches().finally(() => {
      running = undefined;
    });
    return running;
  };

  const pruneAndLog = async (): Promise<void> => {
    try {
      const deleted = await prune();
      if (deleted > 0) logger.info({ deleted, retainMs: options.retainMs }, 'pruned the audit log');
    } catch (error) {
      if (isStoreUnavailable(error))
        logger.warn({ err: error }, 'could not prune the audit log now; trying again at the next prune');
      else logger.error({ err: error }, 'could not prune the audit log; trying again at the next prune');
    }
  };

  // The next prune is timed from the end of the last, so a long first prune after an upgrade never overlaps.
  const pruneThenWait = async (): Promise<void> => {
    await pruneAndLog();
    if (stopped) return;
    timer = setTimeout(pruneThenWait, intervalMs);
    timer.unref();
  };

  return {
    start() {
      if (keepsAll || started || stopped) return;
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
