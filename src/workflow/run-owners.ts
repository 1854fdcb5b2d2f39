import type { SqlDatabase, SqlExecutor } from '../store/index.js';
import {
  type Clock,
  createHeldRenewal,
  createIdGenerator,
  createPeriodicPrune,
  type IdGenerator,
  type Logger,
  type PeriodicPrune,
  type RetentionScheduleOptions,
  silentLogger,
  systemClock,
} from '../util/index.js';
import { WorkflowErrorCodes } from './error-codes.js';
import { decodeTask, encodeTask, type TaskColumns, taskColumnsSql } from './records.js';

/**
 * The process that writes a durable run, as its task rows name it (migration 0042). A run's code lives in
 * that process, so when the process dies its runs are over whatever their rows say: the owner's lease, renewed
 * while it has runs, is how another process (or this one after a restart) can tell (`concludeInterruptedRuns`).
 */
export interface RunOwner {
  readonly id: string;
  /**
   * The lease's new end when the next write of a run must renew it, in that write's own transaction (so no
   * task row of a run lands under an owner row that is not fresh); undefined while the lease is fresh.
   */
  renewalDue(): number | undefined;
  /** A write carrying `renewalDue()`'s end committed. */
  renewed(until: number): void;
  /** A run began writing: while any is held the lease is renewed every third of it, idle nodes or not. */
  hold(): void;
  /** A held run wrote its last record. */
  release(): void;
  /** Stops renewing and, with no run held, gives the lease up. */
  close(): Promise<void>;
}

export interface RunOwnerOptions {
  db: SqlDatabase;
  /** How long the owner counts as alive after a renewal (default 30 s); renewed every third of it. */
  leaseMs?: number;
  clock?: Clock;
  idGenerator?: IdGenerator;
  logger?: Logger;
}

export const defaultRunLeaseMs = 30_000;

const renewSql = `INSERT INTO workflow_run_owners (owner_id, alive_until) VALUES (?, ?)
  ON CONFLICT (owner_id) DO UPDATE SET alive_until = excluded.alive_until`;

/** Renews `owner`'s lease to `until` through `db` (a transaction's executor, to land with its writes). */
export function renewLease(db: SqlExecutor, ownerId: string, until: number): Promise<unknown> {
  return db.run(renewSql, [ownerId, until]);
}

export function createRunOwner(options: RunOwnerOptions): RunOwner {
  const { db } = options;
  const leaseMs = options.leaseMs ?? defaultRunLeaseMs;
  const clock = options.clock ?? systemClock;
  const logger = (options.logger ?? silentLogger).child({ component: 'workflow' });
  const id = (options.idGenerator ?? createIdGenerator())('wro_');
  let aliveUntil = Number.NEGATIVE_INFINITY;
  const renewal = createHeldRenewal({
    intervalMs: leaseMs / 3,
    renew: async () => {
      const until = clock.now() + leaseMs;
      try {
        await renewLease(db, id, until);
        aliveUntil = Math.max(aliveUntil, until);
      } catch (error) {
        // The next write renews it in its own transaction (`renewalDue`), so a refused renewal costs nothing
        // but this line; another process concludes the runs only once the lease has lapsed unrenewed.
        logger.warn({ err: error, ownerId: id }, 'could not renew the workflow run lease');
      }
    },
  });

  return {
    id,
    renewalDue() {
      const now = clock.now();
      return aliveUntil - now < (leaseMs * 2) / 3 ? now + leaseMs : undefined;
    },
    renewed(until) {
      aliveUntil = Math.max(aliveUntil, until);
    },
    hold: renewal.hold,
    release: renewal.release,
    async close() {
      await renewal.stop();
      if (renewal.holding()) return;
      aliveUntil = Number.NEGATIVE_INFINITY;
      await db.run('DELETE FROM workflow_run_owners WHERE owner_id = ?', [id]).catch((error: unknown) => {
        logger.warn({ err: error, ownerId: id }, 'could not give up the workflow run lease');
      });
    },
  };
}

export interface ConcludeInterruptedOptions {
  /** The time the leases are compared with, and the concluded tasks' end. */
  now: number;
  /** This process's owner, never concluded (its lease may lapse while its event loop is blocked). */
  ownOwnerId?: string | undefined;
  /** Tasks one transaction concludes at most (default 100). */
  batchTasks?: number;
  stopping?: () => boolean;
  logger?: Logger;
}

/** An open task whose owner is gone: no owner (rows from before owners), or one whose lease lapsed. */
const orphanedTask = `completed_at IS NULL AND (owner_id IS NULL OR (owner_id <> ? AND NOT EXISTS (
    SELECT 1 FROM workflow_run_owners o WHERE o.owner_id = workflow_tasks.owner_id AND o.alive_until >= ?)))`;

export const interruptedMessage =
  'the agentd process running this workflow run stopped before the run ended (a crash, a kill or a lost machine); its completed stages are kept: run the workflow again';

/**
 * Concludes every task still open whose owner is gone as `failed` with `INTERRUPTED`, batch by batch (each
 * a transaction), then deletes the lapsed owners' rows. A task whose owner renews meanwhile is left alone (the
 * UPDATE re-checks the lease); an undecodable record is logged and skipped. Resolves with the tasks concluded.
 */
export async function concludeInterruptedRuns(
  db: SqlDatabase,
  options: ConcludeInterruptedOptions,
): Promise<{ tasks: number; runs: number }> {
  const { now } = options;
  const own = options.ownOwnerId ?? '';
  const batchTasks = options.batchTasks ?? 100;
  const logger = options.logger ?? silentLogger;
  const runs = new Set<string>();
  let tasks = 0;
  let after = '';
  while (!options.stopping?.()) {
    const rows = await db.all<TaskColumns & { record: string }>(
      `SELECT ${taskColumnsSql}, record FROM workflow_tasks WHERE ${orphanedTask} AND task_id > ? ORDER BY task_id LIMIT ?`,
      [own, now, after, batchTasks],
    );
    if (rows.length === 0) break;
    after = rows.at(-1)!.task_id;
    await db.transaction(
      async (tx) => {
        for (const row of rows) {
          let record: string;
          try {
            const task = decodeTask(row.record, row);
            task.lifecycle = 'concluded';
            task.state = 'failed';
            task.error = { code: WorkflowErrorCodes.interrupted, message: interruptedMessage };
            task.updatedAt = now;
            task.completedAt = now;
            record = encodeTask(task);
          } catch (error) {
            logger.error(
              { err: error, taskId: row.task_id },
              'an interrupted workflow task could not be read',
            );
            continue;
          }
          const changed = await tx.run(
            `UPDATE workflow_tasks SET lifecycle = 'concluded', status = 'failed', record = ?, updated_at = ?, completed_at = ? WHERE task_id = ? AND ${orphanedTask}`,
            [record, now, now, row.task_id, own, now],
          );
          if (changed.changes > 0) {
            tasks++;
            runs.add(row.root_task_id);
          }
        }
      },
      { ambient: false },
    );
    if (rows.length < batchTasks) break;
  }
  await db.run('DELETE FROM workflow_run_owners WHERE alive_until < ? AND owner_id <> ?', [now, own]);
  return { tasks, runs: runs.size };
}

/**
 * Concludes interrupted runs (`concludeInterruptedRuns`) at `start` and then every lease (`intervalMs`,
 * default the owner's 30 s), for a process that keeps running: a run whose process died is shown failed
 * within about two leases of its last renewal, and the retention then counts it ended.
 */
export function createInterruptedRunSweep(
  options: { db: SqlDatabase; owner: RunOwner } & RetentionScheduleOptions,
): PeriodicPrune<{ tasks: number; runs: number }> {
  const { db, owner, logger } = options;
  return createPeriodicPrune(
    { intervalMs: options.intervalMs ?? defaultRunLeaseMs, ...(logger ? { logger } : {}) },
    {
      enabled: true,
      prune: (stopping, now) => concludeInterruptedRuns(db, { now, ownOwnerId: owner.id, stopping, logger }),
      logFields: (concluded) => (concluded.tasks > 0 ? concluded : undefined),
      what: 'workflow runs interrupted by a stopped process',
      verb: { base: 'conclude', past: 'concluded' },
      component: 'workflow',
    },
  );
}
