import {
  createPeriodicPrune,
  deleteInBatches,
  type PeriodicPrune,
  type RetentionScheduleOptions,
} from '../util/index.js';
import type { WorkQueue } from './queue.js';
import type { EndedLane } from './sql/prune.js';
import { terminalWorkStates } from './states.js';

export interface WorkRetentionOptions extends RetentionScheduleOptions {
  /** The queue whose ended items go, by its `retainEndedDays`, `retainEndedSystemDays` and `systemKinds`. */
  queue: Pick<WorkQueue, 'config' | 'deleteEnded'>;
  /**
   * Items one DELETE looks at (default 1,000). Each is a commit of its own, so the write lock is held for one
   * batch at a time; on SQLite a batch also runs on the event loop: 1,000 ended items took about 3 ms.
   */
  batchRows?: number;
}

/**
 * Prunes now, then every `intervalMs` (`start`; a configuration that keeps everything starts nothing);
 * `prune` resolves with how many items went; `stop` ends it after the current batch.
 */
export type WorkRetention = PeriodicPrune<number>;

const dayMs = 24 * 60 * 60 * 1000;

/** Each lane with how long its items are kept after they ended; empty when everything is kept. */
function lanesOf(
  config: WorkRetentionOptions['queue']['config'],
): Array<{ lane: EndedLane; retainMs: number }> {
  const lanes: Array<{ lane: EndedLane; retainMs: number }> = [];
  const retainMs = config.retainEndedDays * dayMs;
  const systemMs = config.retainEndedSystemDays * dayMs;
  if (retainMs > 0) for (const state of terminalWorkStates) lanes.push({ lane: { state }, retainMs });
  // System work is never kept longer than other work: its own retention only ever shortens the general one.
  if (systemMs > 0 && (retainMs === 0 || systemMs < retainMs))
    for (const kind of config.systemKinds) lanes.push({ lane: { kind }, retainMs: systemMs });
  return lanes;
}

/**
 * Keeps the work queue from growing without bound: nothing else ever deletes an item, and the runtime's own
 * maintenance alone ends one every 30 s. The queue and its workers go on meanwhile.
 */
export function createWorkRetention(options: WorkRetentionOptions): WorkRetention {
  const { queue } = options;
  const batchRows = options.batchRows ?? 1_000;
  const lanes = lanesOf(queue.config);

  const prune = async (stopping: () => boolean, now: number): Promise<number> => {
    let deleted = 0;
    for (const { lane, retainMs } of lanes)
      deleted += await deleteInBatches(
        Number.MIN_SAFE_INTEGER,
        async (after) => {
          const step = await queue.deleteEnded({ lane, before: now - retainMs, maxRows: batchRows, after });
          return { deleted: step.deleted, next: step.nextAfter };
        },
        stopping,
      );
    return deleted;
  };

  return createPeriodicPrune(options, {
    enabled: lanes.length > 0,
    prune,
    logFields: (deleted) => (deleted > 0 ? { deleted } : undefined),
    what: 'ended work items',
    component: 'work',
  });
}
