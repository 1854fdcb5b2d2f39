import { isTerminalWorkState, type WorkState } from '../states.js';
import type { WorkItem } from '../types.js';
import type { QueueContext } from './context.js';
import { withEffects } from './effects.js';
import { inList } from './guards.js';
import { afterTerminal, transition } from './transition.js';

/** Cancels the item and, unless `cascade: false`, its live descendants, in one transaction. */
export function cancel(
  ctx: QueueContext,
  id: string,
  options: { reason?: string; cascade?: boolean } = {},
): Promise<WorkItem> {
  return withEffects(ctx, async (tx, effects) => {
    const now = ctx.clock.now();
    const cancelOne = async (itemId: string) => {
      const item = await transition(
        ctx,
        tx,
        itemId,
        'cancelled',
        {
          state_reason: options.reason ?? 'cancelled',
          lease_owner: null,
          lease_expires_at: null,
          resolved_at: now,
        },
        { now },
      );
      await afterTerminal(ctx, tx, item, now, effects);
      return item;
    };
    const cancelled = await cancelOne(id);
    if (options.cascade !== false) {
      let frontier = [id];
      while (frontier.length > 0) {
        const children = await tx.all<{ id: string; state: string }>(
          `SELECT id, state FROM work_items WHERE parent_id IN (${inList(frontier)})`,
          frontier,
        );
        for (const child of children) {
          if (!isTerminalWorkState(child.state as WorkState)) await cancelOne(child.id);
        }
        frontier = children.map((child) => child.id);
      }
    }
    return cancelled;
  });
}
