import { type SqlDatabase, type SqlExecutor, sqlPlaceholders } from '../store/index.js';
import { endedTaskStates } from './task.js';

export interface DeleteEndedRunsStep {
  /** Runs whose tasks all ended before this (epoch ms) are deleted. */
  before: number;
  /** Only runs whose root ended after this (exclusive), where the previous step stopped; else from the oldest. */
  after?: number;
  /** Runs one step looks at: the oldest `maxRuns` roots, and those that ended in the last one's millisecond. */
  maxRuns: number;
}

export interface DeletedWorkflowRuns {
  runs: number;
  /** Rows of the run tables (tasks, stages, events, artifacts) that went with them. */
  rows: number;
  /** `after` of the next step; undefined when no root that ended before the cutoff is left to look at. */
  nextAfter: number | undefined;
}

/** The states as SQL literals: constants of the engine, and no parameters to bind at every statement. */
const endedStates = endedTaskStates.map((state) => `'${state}'`).join(', ');

/**
 * The oldest roots that ended in the range, through `workflow_tasks_ended_runs` (migration 0039): SQLite
 * `SEARCH workflow_tasks USING INDEX workflow_tasks_ended_runs (completed_at>? AND completed_at<?)`, Postgres an
 * index-only scan of it. With nothing to delete a prune is this one statement, finding nothing.
 */
const pageOfEndedRoots = `SELECT COUNT(*) AS n, MAX(completed_at) AS last FROM (SELECT completed_at FROM workflow_tasks
  WHERE parent_task_id IS NULL AND completed_at > ? AND completed_at < ? ORDER BY completed_at LIMIT ?) AS page`;

/**
 * The runs of a page that go: the root ended, and no task of the run (the root, its clones and subtasks) is
 * live or ended after the cutoff. A live task may still write rows of its run, which would be left without
 * their run; so a run with a task whose end was never written (a crash, a refused write) is kept. The same
 * range of the same index, and per root one range of `workflow_child_tasks_by_root` (the root itself is the
 * row just read); a scalar subquery, since as `NOT EXISTS` Postgres may read every task instead.
 */
const endedRunsOfPage = `SELECT run.task_id FROM workflow_tasks AS run
  WHERE run.parent_task_id IS NULL AND run.completed_at > ? AND run.completed_at <= ? AND run.status IN (${endedStates})
    AND (SELECT 1 FROM workflow_tasks AS task WHERE task.root_task_id = run.task_id AND task.parent_task_id IS NOT NULL
      AND (task.completed_at IS NULL OR task.completed_at >= ? OR task.status NOT IN (${endedStates})) LIMIT 1) IS NULL`;

/**
 * The statements that delete a run's rows, each by its root task's id: `workflow_stages` and `workflow_events`
 * through their primary keys (migration 0018), `workflow_artifacts` through `workflow_artifacts_by_root`, the
 * clones and subtasks of `workflow_tasks` through `workflow_child_tasks_by_root` (migration 0047) and the root
 * tasks through the table's key. `workflow_memory` is not a run's: project and global memory outlive every
 * run and keep their own count.
 */
const runDeletes = [
  ['workflow_stages', 'root_task_id IN'],
  ['workflow_events', 'root_task_id IN'],
  ['workflow_artifacts', 'root_task_id IN'],
  ['workflow_tasks', 'parent_task_id IS NOT NULL AND root_task_id IN'],
  ['workflow_tasks', 'task_id IN'],
] as const;

/**
 * Deletes every row of the runs, `listSize` ids a statement, the list filled up with its first id: one
 * statement text per table, however many runs a batch holds, for the driver's statement cache.
 */
async function deleteRuns(tx: SqlExecutor, roots: ReadonlyArray<string>, listSize: number): Promise<number> {
  let rows = 0;
  for (let start = 0; start < roots.length; start += listSize) {
    const ids = roots.slice(start, start + listSize);
    while (ids.length < listSize) ids.push(ids[0]!);
    for (const [table, byRoot] of runDeletes)
      rows += (await tx.run(`DELETE FROM ${table} WHERE ${byRoot} (${sqlPlaceholders(listSize)})`, ids))
        .changes;
  }
  return rows;
}

/**
 * One step of pruning ended workflow runs (see `createWorkflowRetention`): finds the oldest `maxRuns` roots
 * that ended before `before` and after `after`, then, in one transaction, deletes those runs of that range that
 * ended whole, with all their rows, so no reader ever sees half a run.
 */
export async function deleteEndedRuns(
  db: SqlDatabase,
  step: DeleteEndedRunsStep,
): Promise<DeletedWorkflowRuns> {
  const { before, maxRuns } = step;
  const after = step.after ?? Number.MIN_SAFE_INTEGER;
  const page = await db.get<{ n: number; last: number | null }>(pageOfEndedRoots, [after, before, maxRuns]);
  const found = Number(page?.n ?? 0);
  if (found === 0) return { runs: 0, rows: 0, nextAfter: undefined };
  // Up to `last` inclusive: the runs that ended in the same millisecond as the page's last go with it, so the
  // next step can start strictly after it.
  const last = Number(page!.last);
  const { runs, rows } = await db.transaction(
    async (tx) => {
      const roots = (await tx.all<{ task_id: string }>(endedRunsOfPage, [after, last, before])).map(
        (row) => row.task_id,
      );
      return { runs: roots.length, rows: roots.length > 0 ? await deleteRuns(tx, roots, maxRuns) : 0 };
    },
    { ambient: false },
  );
  return { runs, rows, nextAfter: found < maxRuns ? undefined : last };
}
