import type { WorkItem } from '../types.js';
import type { QueueContext } from './context.js';
import { withEffects } from './effects.js';
import { eventBase, publish } from './events.js';
import { notFound } from './guards.js';
import { selectById } from './read.js';
import { transition } from './transition.js';

/** Pauses a live item (releasing any lease); the event names the state it left. */
export function pause(ctx: QueueContext, id: string, options: { reason?: string } = {}): Promise<WorkItem> {
  return withEffects(ctx, async (tx, effects) => {
    const now = ctx.clock.now();
    const before = await selectById(ctx, tx, id, true);
    if (!before) throw notFound(id);
    const item = await transition(
      ctx,
      tx,
      id,
      'paused',
      { state_reason: options.reason ?? 'paused', lease_owner: null, lease_expires_at: null },
      { now },
    );
    effects.push(() =>
      publish(ctx, 'work:paused', item, { ...eventBase(item), previousState: before.state }),
    );
    return item;
  });
}
