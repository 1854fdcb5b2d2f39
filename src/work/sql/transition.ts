import type { SqlExecutor, SqlValue } from '../../store/index.js';
import { rowToWorkItem, type WorkItemRow } from '../rows.js';
import { isTerminalWorkState, statesThatCanEnter, type WorkState } from '../states.js';
import type { WorkItem } from '../types.js';
import { dropAhead } from './ahead.js';
import type { Effect, QueueContext } from './context.js';
import { notify, wakeWorkersAfterCommit } from './effects.js';
import { eventBase, publish, publishTerminal } from './events.js';
import { inList, refusal, stateGuard } from './guards.js';
import { selectById } from './read.js';

/** What a transition requires of the row: its current state, and (for a worker's move) a live lease. */
export interface TransitionGuard {
  /** States the item may leave; default: every state the transition table lets enter `to`. */
  from?: ReadonlyArray<WorkState>;
  /** The worker that must hold an unexpired lease. */
  leaseOwner?: string;
  now: number;
}

/**
 * One checked transition as a single guarded UPDATE, so two processes racing on an item cannot both
 * win. On a miss the item is read back to say precisely why (unknown id, lost lease, illegal move).
 */
export async function transition(
  ctx: QueueContext,
  exec: SqlExecutor,
  id: string,
  to: WorkState,
  sets: Record<string, SqlValue>,
  guard: TransitionGuard,
): Promise<WorkItem> {
  const from = guard.from ?? statesThatCanEnter(to);
  const assignments = ['state = ?', 'updated_at = ?', ...Object.keys(sets).map((column) => `${column} = ?`)];
  const states = stateGuard(from);
  const params: SqlValue[] = [to, guard.now, ...Object.values(sets), id, ...states.params];
  let where = `id = ? AND ${states.sql}`;
  if (guard.leaseOwner !== undefined) {
    where += ' AND lease_owner = ? AND lease_expires_at > ?';
    params.push(guard.leaseOwner, guard.now);
  }
  const row = await exec.get<WorkItemRow>(
    `UPDATE work_items SET ${assignments.join(', ')} WHERE ${where} RETURNING *`,
    params,
  );
  if (row) {
    if (ctx.state.ahead.size > 0) dropAhead(ctx, id);
    return rowToWorkItem(row);
  }
  throw refusal(id, await selectById(ctx, exec, id), to, from, guard.leaseOwner);
}

/** When a child ends, its blocked parent whose awaited children have all ended goes back to the queue. */
export async function maybeUnblockParent(
  ctx: QueueContext,
  tx: SqlExecutor,
  parentId: string,
  now: number,
  effects: Effect[],
): Promise<boolean> {
  const parent = await selectById(ctx, tx, parentId, true);
  if (parent?.state !== 'blocked' || !parent.waitingOn || parent.waitingOn.length === 0) return false;
  const children = await tx.all<{ id: string; state: string }>(
    `SELECT id, state FROM work_items WHERE id IN (${inList(parent.waitingOn)})`,
    parent.waitingOn,
  );
  const allEnded =
    children.length === parent.waitingOn.length &&
    children.every((child) => isTerminalWorkState(child.state as WorkState));
  if (!allEnded) return false;
  const requeued = await transition(
    ctx,
    tx,
    parent.id,
    'queued',
    { run_after: now, state_reason: 'children finished' },
    { now, from: ['blocked'] },
  );
  await wakeWorkersAfterCommit(ctx, tx, effects, () =>
    publish(ctx, 'work:unblocked', requeued, eventBase(requeued)),
  );
  return true;
}

/** What follows an item's end: other processes hear of it, the bus after commit, a waiting parent moves. */
export async function afterTerminal(
  ctx: QueueContext,
  tx: SqlExecutor,
  item: WorkItem,
  now: number,
  effects: Effect[],
): Promise<void> {
  await notify(ctx, tx, { t: 'terminal', id: item.id });
  effects.push(() => publishTerminal(ctx, item));
  if (item.parentId) await maybeUnblockParent(ctx, tx, item.parentId, now, effects);
}
