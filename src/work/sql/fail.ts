import type { WorkErrorPayload } from '../events.js';
import type { WorkItem } from '../types.js';
import { forgetHandedOut } from './ahead.js';
import { noteDeadline, type QueueContext } from './context.js';
import { wakeWorkersAfterCommit, withEffects } from './effects.js';
import { eventBase, publish } from './events.js';
import { leasedStates, notFound } from './guards.js';
import { selectById } from './read.js';
import { afterTerminal, transition } from './transition.js';

/** Exponential backoff before retry `attempt + 1`, capped at `backoffMaxMs`. */
export function backoffMs(ctx: QueueContext, attempt: number): number {
  return Math.min(ctx.config.backoffMaxMs, ctx.config.backoffBaseMs * 2 ** Math.max(0, attempt - 1));
}

/**
 * Records a failed attempt. A retryable error with attempts left goes back to `queued` after the backoff;
 * otherwise the item ends `failed` (not retryable) or `dead` (attempts used up).
 */
export function fail(
  ctx: QueueContext,
  id: string,
  workerId: string,
  error: WorkErrorPayload,
): Promise<WorkItem> {
  // A failed item frees its worker's slot without a completion: nothing is claimed ahead for it.
  forgetHandedOut(ctx, workerId, [id]);
  return withEffects(ctx, async (tx, effects) => {
    const now = ctx.clock.now();
    const current = await selectById(ctx, tx, id, true);
    if (!current) throw notFound(id);
    const durationMs = current.startedAt !== null ? now - current.startedAt : 0;
    const outcome = JSON.stringify({ error, durationMs });
    const failed = await transition(
      ctx,
      tx,
      id,
      'failed',
      { outcome, lease_owner: null, lease_expires_at: null, waiting_on: null, resolved_at: now },
      { now, from: leasedStates, leaseOwner: workerId },
    );
    if (error.retryable && failed.attempts < failed.maxAttempts) {
      const retryAt = now + backoffMs(ctx, failed.attempts);
      noteDeadline(ctx.state, retryAt);
      const requeued = await transition(
        ctx,
        tx,
        id,
        'queued',
        {
          run_after: retryAt,
          resolved_at: null,
          state_reason: `retry after: ${error.message}`.slice(0, 500),
        },
        { now, from: ['failed'] },
      );
      await wakeWorkersAfterCommit(ctx, tx, effects, () =>
        publish(ctx, 'work:failed', requeued, {
          ...eventBase(requeued),
          error,
          attempt: failed.attempts,
          willRetry: true,
          retryAt,
        }),
      );
      return requeued;
    }
    if (error.retryable) {
      const dead = await transition(
        ctx,
        tx,
        id,
        'dead',
        { state_reason: 'attempts used up' },
        { now, from: ['failed'] },
      );
      await afterTerminal(ctx, tx, dead, now, effects);
      return dead;
    }
    await afterTerminal(ctx, tx, failed, now, effects);
    return failed;
  });
}
