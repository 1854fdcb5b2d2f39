import { z } from 'zod';
import {
  createPeriodicPrune,
  deleteInBatches,
  type PeriodicPrune,
  type RetentionScheduleOptions,
} from '../util/index.js';
import type { EventStore } from './event-store.js';

/** The `audit:` section of agentd.yaml: how long the audit log (`events`) keeps what it recorded. */
export const auditConfigSchema = z
  .object({
    /** Days an event is kept (fractions allowed); 0 keeps every event forever. */
    retainDays: z.number().nonnegative().default(30),
  })
  .strict();

export type AuditConfig = z.infer<typeof auditConfigSchema>;

export interface EventRetentionOptions extends RetentionScheduleOptions {
  events: EventStore;
  /** Events written longer ago than this are deleted; 0 keeps them all. */
  retainMs: number;
  /**
   * Most rows one DELETE removes (default 1,000). Each is a transaction of its own, so the write lock is
   * held for one batch at a time; on SQLite a batch also runs on the event loop, a pause for the chat turn
   * that arrives meanwhile: 1,000 rows of a chat server's shape took about 2 ms, 5,000 about 25.
   */
  batchRows?: number;
}

/** Prunes now, then hourly (`start`); `prune` resolves with how many events went; `stop` ends it. */
export type EventRetention = PeriodicPrune<number>;

/**
 * Keeps the audit log from growing without bound: every recorded bus event is a row, and nothing else ever
 * deletes one. A prune the database refuses (a full disk can refuse a DELETE too, a lost connection) is
 * logged and tried again at the next one; the recorder goes on writing meanwhile.
 */
export function createEventRetention(options: EventRetentionOptions): EventRetention {
  const batchRows = options.batchRows ?? 1_000;

  const prune = async (stopping: () => boolean, now: number): Promise<number> => {
    if (options.retainMs <= 0) return 0;
    const before = now - options.retainMs;
    return deleteInBatches(
      0,
      async (fromId) => {
        const step = await options.events.deleteOlderThan(before, { fromId, maxRows: batchRows });
        return { deleted: step.deleted, next: step.nextFromId };
      },
      stopping,
    );
  };

  return createPeriodicPrune(options, {
    enabled: options.retainMs > 0,
    prune,
    logFields: (deleted) => (deleted > 0 ? { deleted, retainMs: options.retainMs } : undefined),
    what: 'the audit log',
    component: 'store',
  });
}
