import { expect, it } from 'vitest';
import { block, setWaitingOn } from '../../../src/work/sql/block.js';
import { cancel } from '../../../src/work/sql/cancel.js';
import { WorkErrorCodes } from '../../../src/work/states.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { claimed, stepContext, submitted } from './helpers.js';

describeEachDatabase('work sql: block and waiting', (getDb) => {
  it('blocks a queued item, or the caller’s running item while releasing its lease', async () => {
    const { ctx, events } = stepContext(getDb());
    const queued = await submitted(ctx);
    expect(await block(ctx, queued.id, { reason: 'needs a key' })).toMatchObject({
      state: 'blocked',
      stateReason: 'needs a key',
    });
    expect(events.at(-1)).toMatchObject({
      type: 'work:blocked',
      data: { reason: 'needs a key', waitingOn: [] },
    });
    const running = await claimed(ctx, 'w1', { start: true });
    await expect(block(ctx, running.id, { reason: 'x', workerId: 'w2' })).rejects.toMatchObject({
      code: WorkErrorCodes.leaseExpired,
    });
    expect(await block(ctx, running.id, { reason: 'x', workerId: 'w1' })).toMatchObject({
      state: 'blocked',
      leaseOwner: null,
    });
  });

  it('blocking on children that have all ended re-queues at once', async () => {
    const { ctx } = stepContext(getDb());
    const parent = await submitted(ctx);
    expect((await block(ctx, parent.id, { reason: 'wait', waitingOn: [] })).state).toBe('blocked');
    const other = await submitted(ctx);
    const child = await submitted(ctx, { parentId: other.id, paused: true });
    await cancel(ctx, child.id);
    expect((await block(ctx, other.id, { reason: 'wait', waitingOn: [child.id] })).state).toBe('queued');
  });

  it('records and clears the children a running item awaits, under its lease', async () => {
    const { ctx, types } = stepContext(getDb());
    const item = await claimed(ctx, 'w1', { start: true });
    expect((await setWaitingOn(ctx, item.id, 'w1', ['work-a'])).waitingOn).toEqual(['work-a']);
    expect(types().at(-1)).toBe('work:waiting');
    expect((await setWaitingOn(ctx, item.id, 'w1', null)).waitingOn).toBeNull();
    await expect(setWaitingOn(ctx, item.id, 'w2', ['work-a'])).rejects.toMatchObject({
      code: WorkErrorCodes.leaseExpired,
    });
    await expect(setWaitingOn(ctx, 'work-nope', 'w1', null)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
