import { expect, it } from 'vitest';
import { selectById } from '../../../src/work/sql/read.js';
import { release, requeueFrom } from '../../../src/work/sql/requeue.js';
import { WorkErrorCodes } from '../../../src/work/states.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { claimed, stepContext, submitted } from './helpers.js';

describeEachDatabase('work sql: requeue and release', (getDb) => {
  it('release hands the item back without spending an attempt and wakes workers', async () => {
    const { ctx, types } = stepContext(getDb());
    const item = await claimed(ctx, 'w1', { start: true });
    const before = ctx.state.wakeSequence;
    const released = await release(ctx, item.id, 'w1');
    expect(released).toMatchObject({ state: 'queued', attempts: 0, leaseOwner: null });
    expect((await selectById(ctx, ctx.db, item.id))?.attempts).toBe(0);
    expect(types().at(-1)).toBe('work:requeued');
    expect(ctx.state.wakeSequence).toBe(before + 1);
    await expect(release(ctx, item.id, 'w1')).rejects.toMatchObject({ code: WorkErrorCodes.leaseExpired });
  });

  it('requeues only from the named state, with the matching event', async () => {
    const { ctx, events } = stepContext(getDb());
    const paused = await submitted(ctx, { paused: true });
    await expect(requeueFrom(ctx, paused.id, 'blocked', 'work:unblocked')).rejects.toMatchObject({
      code: WorkErrorCodes.invalidTransition,
    });
    const resumed = await requeueFrom(ctx, paused.id, 'paused', 'work:resumed');
    expect(resumed).toMatchObject({ state: 'queued', stateReason: null });
    expect(events.at(-1)).toMatchObject({ type: 'work:resumed', data: { workItemId: paused.id } });
  });
});
