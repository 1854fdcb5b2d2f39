import { rowToWorkItem, type WorkItemRow } from '../rows.js';
import type { WorkItem } from '../types.js';
import type { QueueContext } from './context.js';
import { eventBase, publish } from './events.js';
import { leasedStates, leaseExpired, notFound, stateGuard } from './guards.js';
import { selectById } from './read.js';
import { transition } from './transition.js';

const leased = stateGuard(leasedStates);

/** claimed → running; refused with `LEASE_EXPIRED` when the caller no longer holds the lease. */
export async function start(ctx: QueueContext, id: string, workerId: string): Promise<WorkItem> {
  const now = ctx.clock.now();
  const item = await transition(
    ctx,
    ctx.db,
    id,
    'running',
    { started_at: now, lease_expires_at: now + ctx.config.leaseMs },
    { now, from: ['claimed'], leaseOwner: workerId },
  );
  publish(ctx, 'work:started', item, { ...eventBase(item), workerId, attempt: item.attempts });
  return item;
}

/** Extends the caller's lease; `LEASE_EXPIRED` when it has already lapsed or moved to another worker. */
export async function heartbeat(
  ctx: QueueContext,
  id: string,
  workerId: string,
  options: { leaseMs?: number } = {},
): Promise<WorkItem> {
  const now = ctx.clock.now();
  const row = await ctx.db.get<WorkItemRow>(
    `UPDATE work_items SET lease_expires_at = ?, updated_at = ? WHERE id = ? AND ${leased.sql} AND lease_owner = ? AND lease_expires_at > ? RETURNING *`,
    [now + (options.leaseMs ?? ctx.config.leaseMs), now, id, ...leased.params, workerId, now],
  );
  if (row) return rowToWorkItem(row);
  const current = await selectById(ctx, ctx.db, id);
  if (!current) throw notFound(id);
  throw leaseExpired(
    id,
    `the item is ${current.state}${current.leaseOwner ? ` and held by ${current.leaseOwner}` : ''}`,
  );
}
