import { expect, it } from 'vitest';
import { claimOnce } from '../../../src/work/sql/claim.js';
import { selectById } from '../../../src/work/sql/read.js';
import { reapExpiredLeases } from '../../../src/work/sql/reap.js';
import { transition } from '../../../src/work/sql/transition.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { claimed, stepContext, submitted } from './helpers.js';

describeEachDatabase('work sql: reap', (getDb) => {
  it('re-queues a lapsed lease, kills one with attempts used up, and leaves live leases alone', async () => {
    const { ctx, clock, types } = stepContext(getDb(), { leaseMs: 1_000, maxAttempts: 1 });
    const lastTry = await claimed(ctx, 'w1');
    const retry = await submitted(ctx, { maxAttempts: 2 });
    await claimOnce(ctx, 'w1', 1, undefined);
    clock.advance(1_000);
    const live = await claimed(ctx, 'w2');
    const result = await reapExpiredLeases(ctx);
    expect(result).toEqual({ requeued: [retry.id], dead: [lastTry.id], blocked: [], unblocked: [] });
    expect(await selectById(ctx, ctx.db, retry.id)).toMatchObject({
      state: 'queued',
      stateReason: 'lease expired',
    });
    expect(await selectById(ctx, ctx.db, lastTry.id)).toMatchObject({
      state: 'dead',
      outcome: { error: { code: 'LEASE_EXPIRED' } },
    });
    expect((await selectById(ctx, ctx.db, live.id))?.leaseOwner).toBe('w2');
    expect(types()).toContain('work:requeued');
    expect(types()).toContain('work:dead');
    expect(ctx.state.lastReapAt).toBe(clock.now());
  });

  it('blocks a lapsed item that was awaiting children, and repairs a parent left blocked by a crash', async () => {
    const { ctx, clock } = stepContext(getDb(), { leaseMs: 1_000 });
    const waiting = await claimed(ctx, 'w1', { start: true });
    const child = await submitted(ctx, { parentId: waiting.id });
    await transition(
      ctx,
      ctx.db,
      waiting.id,
      'running',
      { waiting_on: JSON.stringify([child.id]) },
      {
        now: clock.now(),
        from: ['running'],
      },
    );
    clock.advance(1_000);
    expect((await reapExpiredLeases(ctx)).blocked).toEqual([waiting.id]);
    expect((await selectById(ctx, ctx.db, waiting.id))?.state).toBe('blocked');
    // The child ends without its parent being re-queued, as a crash between the two would leave it.
    await transition(ctx, ctx.db, child.id, 'cancelled', { resolved_at: clock.now() }, { now: clock.now() });
    expect((await reapExpiredLeases(ctx)).unblocked).toEqual([waiting.id]);
    expect((await selectById(ctx, ctx.db, waiting.id))?.state).toBe('queued');
  });
});
