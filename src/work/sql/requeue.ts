import type { WorkItem } from '../types.js';
import { forgetHandedOut } from './ahead.js';
import type { QueueContext } from './context.js';
import { wakeWorkersAfterCommit, withEffects } from './effects.js';
import { eventBase, publish } from './events.js';
import { leasedStates } from './guards.js';
import { transition } from './transition.js';

/** `resume` and `unblock` differ only in the state they leave and the event that says so. */
export function requeueFrom(
  ctx: QueueContext,
  id: string,
  from: 'paused' | 'blocked',
  event: 'work:resumed' | 'work:unblocked',
): Promise<WorkItem> {
  return withEffects(ctx, async (tx, effects) => {
    const now = ctx.clock.now();
    const item = await transition(
      ctx,
      tx,
      id,
      'queued',
      { run_after: now, state_reason: null },
      { now, from: [from] },
    );
    await wakeWorkersAfterCommit(ctx, tx, effects, () => publish(ctx, event, item, eventBase(item)));
    return item;
  });
}

/** Hands a claimed or running item back without spending an attempt (worker shutting down). */
export function release(ctx: QueueContext, id: string, workerId: string): Promise<WorkItem> {
  forgetHandedOut(ctx, workerId, [id]);
  return withEffects(ctx, async (tx, effects) => {
    const now = ctx.clock.now();
    const item = await transition(
      ctx,
      tx,
      id,
      'queued',
      {
        lease_owner: null,
        lease_expires_at: null,
        run_after: now,
        state_reason: 'released by worker',
      },
      { now, from: leasedStates, leaseOwner: workerId },
    );
    // Handing work back is not a failed attempt.
    await tx.run('UPDATE work_items SET attempts = attempts - 1 WHERE id = ? AND attempts > 0', [id]);
    await wakeWorkersAfterCommit(ctx, tx, effects, () =>
      publish(ctx, 'work:requeued', item, { ...eventBase(item), reason: 'released' }),
    );
    return { ...item, attempts: Math.max(0, item.attempts - 1) };
  });
}
