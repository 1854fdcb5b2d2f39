import type { SqlDatabase } from '../store/index.js';
import {
  createPeriodicPrune,
  deleteInBatches,
  type PeriodicPrune,
  type RetentionScheduleOptions,
} from '../util/index.js';
import { deleteEndedRuns } from './prune-runs.js';

export interface WorkflowRetentionOptions extends RetentionScheduleOptions {
  /** The database the durable engines write their runs to (the platform store's). */
  db: SqlDatabase;
  /** Days a run is kept after it ended (fractions allowed); 0 keeps every run. */
  retainEndedDays: number;
  /**
   * Runs one transaction deletes at most (default 100), with all their rows. Each is a commit of its own, so
   * the write lock is held for one batch at a time; on SQLite a batch also runs on the event loop: 100 runs
   * of a 3-node chain (1,100 rows) took a median 1.7 ms on a SQLite file.
   */
  batchRuns?: number;
}

export interface PrunedWorkflowRuns {
  runs: number;
  /** Rows of tasks, stages, events and artifacts that went with them. */
  rows: number;
}

/**
 * Prunes now, then every `intervalMs` (`start`; a retention that keeps everything starts nothing); `prune`
 * resolves with what went; `stop` ends it after the current batch.
 */
export type WorkflowRetention = PeriodicPrune<PrunedWorkflowRuns>;

const dayMs = 24 * 60 * 60 * 1000;

/**
 * Keeps the durable record of workflow runs from growing without bound: nothing else ever deletes a run, and a
 * workflow started by cron every minute writes some 1,440 runs a day. A run goes whole once all of it ended
 * more than `retainEndedDays` ago; live runs and the workflows' memory are never touched. The engines go on
 * meanwhile: a pruned run is one they no longer hold, and `inspect` answers it as unknown.
 */
export function createWorkflowRetention(options: WorkflowRetentionOptions): WorkflowRetention {
  const { db } = options;
  const batchRuns = options.batchRuns ?? 100;
  const retainMs = options.retainEndedDays * dayMs;

  const prune = async (stopping: () => boolean, now: number): Promise<PrunedWorkflowRuns> => {
    if (retainMs <= 0) return { runs: 0, rows: 0 };
    const before = now - retainMs;
    let rows = 0;
    const runs = await deleteInBatches(
      Number.MIN_SAFE_INTEGER,
      async (after) => {
        const step = await deleteEndedRuns(db, { before, maxRuns: batchRuns, after });
        rows += step.rows;
        return { deleted: step.runs, next: step.nextAfter };
      },
      stopping,
    );
    return { runs, rows };
  };

  return createPeriodicPrune(options, {
    enabled: retainMs > 0,
    prune,
    logFields: (pruned) => (pruned.runs > 0 ? { ...pruned, retainMs } : undefined),
    what: 'ended workflow runs',
    component: 'workflow',
  });
}
