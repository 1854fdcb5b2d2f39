import { rowToWorkItem, type WorkItemRow } from '../rows.js';
import { WorkErrorCodes } from '../states.js';
import type { QueueContext } from './context.js';
import { wakeWorkersAfterCommit, withEffects } from './effects.js';
import { eventBase, publish } from './events.js';
import { afterTerminal, maybeUnblockParent, transition } from './transition.js';

/** The ids each kind of repair touched. */
export interface ReapResult {
  requeued: string[];
  dead: string[];
  blocked: string[];
  unblocked: string[];
}

/**
 * Re-queues (or, attempts used up, kills) items whose lease lapsed; moves items that were awaiting
 * children to `blocked`; re-queues blocked parents whose children have all ended.
 */
export async function reapExpiredLeases(ctx: QueueContext): Promise<ReapResult> {
  const now = ctx.clock.now();
  ctx.state.lastReapAt = now;
  const result: ReapResult = { requeued: [], dead: [], blocked: [], unblocked: [] };
  const skipLocked = ctx.isPostgres ? ' FOR UPDATE SKIP LOCKED' : '';
  await withEffects(ctx, async (tx, effects) => {
    const expired = await tx.all<WorkItemRow>(
      `SELECT * FROM work_items WHERE state IN ('claimed', 'running') AND lease_expires_at <= ? ORDER BY lease_expires_at LIMIT 500${skipLocked}`,
      [now],
    );
    for (const row of expired.map(rowToWorkItem)) {
      const stillExpired = { now, from: [row.state] };
      const cleared = { lease_owner: null, lease_expires_at: null };
      try {
        if (row.state === 'running' && row.waitingOn && row.waitingOn.length > 0) {
          const blocked = await transition(
            ctx,
            tx,
            row.id,
            'blocked',
            { ...cleared, state_reason: 'lease expired while awaiting child work' },
            stillExpired,
          );
          result.blocked.push(row.id);
          effects.push(() =>
            publish(ctx, 'work:blocked', blocked, {
              ...eventBase(blocked),
              reason: blocked.stateReason ?? '',
              waitingOn: row.waitingOn ?? [],
            }),
          );
          if (await maybeUnblockParent(ctx, tx, row.id, now, effects)) result.unblocked.push(row.id);
        } else if (row.attempts >= row.maxAttempts) {
          const error = {
            code: WorkErrorCodes.leaseExpired,
            message: `the worker's lease expired on attempt ${row.attempts} of ${row.maxAttempts}`,
            retryable: false,
          };
          const dead = await transition(
            ctx,
            tx,
            row.id,
            'dead',
            {
              ...cleared,
              state_reason: 'lease expired; attempts used up',
              outcome: JSON.stringify({ error }),
              resolved_at: now,
            },
            stillExpired,
          );
          result.dead.push(row.id);
          await afterTerminal(ctx, tx, dead, now, effects);
        } else {
          const requeued = await transition(
            ctx,
            tx,
            row.id,
            'queued',
            { ...cleared, run_after: now, state_reason: 'lease expired' },
            stillExpired,
          );
          result.requeued.push(row.id);
          await wakeWorkersAfterCommit(ctx, tx, effects, () =>
            publish(ctx, 'work:requeued', requeued, { ...eventBase(requeued), reason: 'lease-expired' }),
          );
        }
      } catch (error) {
        // Another process reaped or finished it in the meantime; nothing to do for this row.
        ctx.logger.debug({ err: error, workItemId: row.id }, 'lease reap skipped an item');
      }
    }
    // A crash between a child's end and its parent's re-queue leaves the parent blocked: repair it here.
    const blockedParents = await tx.all<{ id: string }>(
      "SELECT id FROM work_items WHERE state = 'blocked' AND waiting_on IS NOT NULL LIMIT 500",
    );
    for (const parent of blockedParents) {
      if (result.unblocked.includes(parent.id)) continue;
      if (await maybeUnblockParent(ctx, tx, parent.id, now, effects)) result.unblocked.push(parent.id);
    }
  });
  return result;
}
