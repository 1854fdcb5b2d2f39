import { expect, it } from 'vitest';
import { cancel } from '../../../src/work/sql/cancel.js';
import { counts, getMany, list, selectById } from '../../../src/work/sql/read.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { claimed, stepContext, submitted } from './helpers.js';

describeEachDatabase('work sql: reads', (getDb) => {
  it('lists with filters and orders, counts per state, and reads many in the order asked', async () => {
    const { ctx, clock } = stepContext(getDb());
    const a = await submitted(ctx, { kind: 'mail', sessionKey: 's1' });
    clock.advance(1);
    const b = await claimed(ctx, 'w1', { submission: { kind: 'chat', agentId: 'x', priority: 9 } });
    clock.advance(1);
    const c = await submitted(ctx, { kind: 'mail', sessionKey: 's1' });
    await cancel(ctx, c.id);
    expect((await list(ctx)).map((item) => item.id)).toEqual([c.id, b.id, a.id]);
    expect((await list(ctx, { order: 'oldest', limit: 2 })).map((item) => item.id)).toEqual([a.id, b.id]);
    expect((await list(ctx, { kind: 'mail', states: ['queued'] })).map((item) => item.id)).toEqual([a.id]);
    expect((await list(ctx, { agentId: 'x' })).map((item) => item.id)).toEqual([b.id]);
    expect((await list(ctx, { kinds: ['chat'] })).map((item) => item.id)).toEqual([b.id]);
    expect(await list(ctx, { kinds: [] })).toEqual([]);
    expect((await list(ctx, { excludeKinds: ['chat'] })).map((item) => item.id)).toEqual([c.id, a.id]);
    expect(
      (await list(ctx, { order: 'recently-resolved', resolvedSince: 0 })).map((item) => item.id),
    ).toEqual([c.id]);
    const all = await counts(ctx);
    expect(all).toMatchObject({ queued: 1, claimed: 1, cancelled: 1, completed: 0 });
    expect(await counts(ctx, { sessionKey: 's1' })).toMatchObject({ queued: 1, claimed: 0, cancelled: 1 });
    expect((await getMany(ctx, [c.id, 'work-nope', a.id])).map((item) => item.id)).toEqual([c.id, a.id]);
    expect(await getMany(ctx, [])).toEqual([]);
    expect(await selectById(ctx, ctx.db, 'work-nope')).toBeUndefined();
  });
});
