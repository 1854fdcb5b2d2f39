import type { SqlValue } from '../../store/index.js';
import { terminalWorkStates, type WorkState } from '../states.js';
import type { QueueContext } from './context.js';
import { stateGuard } from './guards.js';

/**
 * The ended items one prune walks in `resolved_at` order: those of one terminal state, through
 * `work_items_state_resolved`, or the top-level ones of one kind, through `work_items_ended_by_kind`
 * (migration 0038). A lane names the index's leading column, so each statement is a range of one index.
 */
export type EndedLane = { state: WorkState } | { kind: string };

export interface DeleteEndedStep {
  lane: EndedLane;
  /** Items that ended before this (epoch ms) are deleted. */
  before: number;
  /** Only items that ended after this (exclusive), where the previous step stopped; else from the oldest. */
  after?: number;
  /** Items one step looks at: the lane's oldest `maxRows`, and those ended in the last one's millisecond. */
  maxRows: number;
}

export interface DeletedWorkItems {
  deleted: number;
  /** `after` of the next step; undefined when the lane holds nothing more that ended before the cutoff. */
  nextAfter: number | undefined;
}

/**
 * A family goes together, children first: an item with a child left stays (the foreign key of `parent_id`
 * refuses it anyway), and a child stays while its parent is live or ended after the cutoff, since a live
 * parent reads its children (`await_child_work`, `spawn_child_work`'s idempotency, the re-queue of a blocked
 * parent, which needs all it waits on). Each parent then goes in a later step or prune than its last child.
 * Scalar subqueries keep both checks one index lookup per row: as `NOT EXISTS` Postgres may turn them into a
 * join or a hashed subplan that reads every child or every item.
 */
const familyEnded = `(SELECT 1 FROM work_items AS child WHERE child.parent_id = ended.id LIMIT 1) IS NULL
  AND (ended.parent_id IS NULL
    OR (SELECT parent.resolved_at FROM work_items AS parent WHERE parent.id = ended.parent_id) < ?)`;

/**
 * A kind's lane is read through an index without the state, so the state is checked here, as the complement
 * of the live states (see `stateGuard`); it holds top-level items only: a child goes with its family, by the
 * lanes of the states.
 */
const kindLaneGuard = stateGuard([...terminalWorkStates]);

/**
 * One step of pruning ended items (see `createWorkRetention`): finds the oldest `maxRows` items of the lane
 * that ended before `before` and after `after`, then deletes those of that range that no other item needs.
 * Both statements are ranges of the lane's index; each step is its own commit.
 */
export async function deleteEnded(ctx: QueueContext, step: DeleteEndedStep): Promise<DeletedWorkItems> {
  const { lane, before, maxRows } = step;
  const after = step.after ?? Number.MIN_SAFE_INTEGER;
  const [column, laneValue] = 'state' in lane ? ['state', lane.state] : ['kind', lane.kind];
  const page = await ctx.db.get<{ n: number; last: number }>(
    `SELECT COUNT(*) AS n, MAX(resolved_at) AS last FROM (SELECT resolved_at FROM work_items
      WHERE ${column} = ? AND resolved_at > ? AND resolved_at < ? ORDER BY resolved_at LIMIT ?) AS page`,
    [laneValue, after, before, maxRows],
  );
  const found = Number(page?.n ?? 0);
  if (found === 0) return { deleted: 0, nextAfter: undefined };
  const last = Number(page!.last);
  // Up to `last` inclusive: the items that ended in the same millisecond as the page's last go with it, so
  // the next step can start strictly after it.
  const params: SqlValue[] = [laneValue, after, last];
  let laneWhere = `${column} = ? AND resolved_at > ? AND resolved_at <= ?`;
  if ('kind' in lane) {
    laneWhere += ` AND parent_id IS NULL AND ${kindLaneGuard.sql}`;
    params.push(...kindLaneGuard.params);
  }
  const { changes } = await ctx.db.run(
    `DELETE FROM work_items AS ended WHERE ${laneWhere} AND ${familyEnded}`,
    [...params, before],
  );
  return { deleted: changes, nextAfter: found < maxRows ? undefined : last };
}
