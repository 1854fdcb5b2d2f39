import { expect, it } from 'vitest';
import { cancel } from '../../../src/work/sql/cancel.js';
import { pause } from '../../../src/work/sql/pause.js';
import { getMany } from '../../../src/work/sql/read.js';
import { WorkErrorCodes } from '../../../src/work/states.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { claimed, stepContext, submitted } from './helpers.js';

describeEachDatabase('work sql: cancel and pause', (getDb) => {
  it('cancels an item and its live descendants, leaving ended ones as they were', async () => {
    const { ctx, types } = stepContext(getDb());
    const root = await submitted(ctx);
    const child = await submitted(ctx, { parentId: root.id });
    const grandchild = await submitted(ctx, { parentId: child.id });
    const ended = await submitted(ctx, { parentId: root.id });
    await cancel(ctx, ended.id, { reason: 'earlier' });
    const cancelled = await cancel(ctx, root.id, { reason: 'stop' });
    expect(cancelled).toMatchObject({ state: 'cancelled', stateReason: 'stop' });
    const items = await getMany(ctx, [child.id, grandchild.id, ended.id]);
    expect(items.map((item) => [item.state, item.stateReason])).toEqual([
      ['cancelled', 'stop'],
      ['cancelled', 'stop'],
      ['cancelled', 'earlier'],
    ]);
    expect(types().filter((type) => type === 'work:cancelled')).toHaveLength(4);
    await expect(cancel(ctx, root.id)).rejects.toMatchObject({ code: WorkErrorCodes.invalidTransition });
  });

  it('cascade: false leaves the children running', async () => {
    const { ctx } = stepContext(getDb());
    const root = await submitted(ctx);
    const child = await submitted(ctx, { parentId: root.id });
    await cancel(ctx, root.id, { cascade: false });
    expect((await getMany(ctx, [child.id]))[0]?.state).toBe('queued');
  });

  it('pauses a leased item, releasing the lease, and says which state it left', async () => {
    const { ctx, events } = stepContext(getDb());
    const item = await claimed(ctx, 'w1', { start: true });
    expect(await pause(ctx, item.id, { reason: 'hold' })).toMatchObject({
      state: 'paused',
      leaseOwner: null,
      stateReason: 'hold',
    });
    expect(events.at(-1)).toMatchObject({ type: 'work:paused', data: { previousState: 'running' } });
    await expect(pause(ctx, 'work-nope')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
