import type { SqlValue } from '../../store/index.js';
import { rowToWorkItem, type WorkItemRow } from '../rows.js';
import type { WorkItem } from '../types.js';
import type { QueueContext } from './context.js';
import { withEffects } from './effects.js';
import { eventBase, publish } from './events.js';
import { leasedStates, leaseExpired, notFound, stateGuard } from './guards.js';
import { selectById } from './read.js';
import { maybeUnblockParent, transition } from './transition.js';

export interface BlockOptions {
  reason: string;
  /** The worker holding the item's lease, to block its running item (the lease is released). */
  workerId?: string;
  waitingOn?: string[];
}

/** Explicitly blocks a queued item, or the caller's running item (releasing its lease). */
export function block(ctx: QueueContext, id: string, options: BlockOptions): Promise<WorkItem> {
  return withEffects(ctx, async (tx, effects) => {
    const now = ctx.clock.now();
    const sets: Record<string, SqlValue> = {
      state_reason: options.reason,
      lease_owner: null,
      lease_expires_at: null,
      ...(options.waitingOn ? { waiting_on: JSON.stringify(options.waitingOn) } : {}),
    };
    const item = options.workerId
      ? await transition(ctx, tx, id, 'blocked', sets, {
          now,
          from: leasedStates,
          leaseOwner: options.workerId,
        })
      : await transition(ctx, tx, id, 'blocked', sets, { now, from: ['queued'] });
    effects.push(() =>
      publish(ctx, 'work:blocked', item, {
        ...eventBase(item),
        reason: options.reason,
        waitingOn: item.waitingOn ?? [],
      }),
    );
    if (options.waitingOn && options.waitingOn.length > 0)
      await maybeUnblockParent(ctx, tx, id, now, effects);
    return (await selectById(ctx, tx, id)) ?? item;
  });
}

/** Records the children a running item awaits, so a restart resumes the wait (see docs/work.md). */
export async function setWaitingOn(
  ctx: QueueContext,
  id: string,
  workerId: string,
  childIds: string[] | null,
): Promise<WorkItem> {
  const now = ctx.clock.now();
  const running = stateGuard(['running']);
  const row = await ctx.db.get<WorkItemRow>(
    `UPDATE work_items SET waiting_on = ?, updated_at = ? WHERE id = ? AND ${running.sql} AND lease_owner = ? AND lease_expires_at > ? RETURNING *`,
    [
      childIds && childIds.length > 0 ? JSON.stringify(childIds) : null,
      now,
      id,
      ...running.params,
      workerId,
      now,
    ],
  );
  if (!row) {
    const current = await selectById(ctx, ctx.db, id);
    if (!current) throw notFound(id);
    throw leaseExpired(id, `the item is ${current.state}`);
  }
  const item = rowToWorkItem(row);
  if (childIds && childIds.length > 0)
    publish(ctx, 'work:waiting', item, { ...eventBase(item), waitingOn: childIds });
  return item;
}
