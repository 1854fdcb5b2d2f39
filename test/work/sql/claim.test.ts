import { expect, it } from 'vitest';
import { claimBatch, claimFilterSql, claimOnce } from '../../../src/work/sql/claim.js';
import { selectById } from '../../../src/work/sql/read.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { stepContext, submitted } from './helpers.js';

describeEachDatabase('work sql: claim', (getDb) => {
  it('takes ready items by priority, then age, under a lease, and skips items not yet due', async () => {
    const { ctx, clock, types } = stepContext(getDb(), { leaseMs: 2_000 });
    const low = await submitted(ctx, { priority: 0 });
    clock.advance(1);
    const high = await submitted(ctx, { priority: 5 });
    clock.advance(1);
    await submitted(ctx, { priority: 9, delayMs: 60_000 });
    const items = await claimOnce(ctx, 'w1', 10, undefined);
    expect(items.map((item) => item.id)).toEqual([high.id, low.id]);
    expect(items[0]).toMatchObject({
      state: 'claimed',
      leaseOwner: 'w1',
      leaseExpiresAt: clock.now() + 2_000,
      attempts: 1,
    });
    expect(types().filter((type) => type === 'work:claimed')).toHaveLength(2);
    expect(await claimOnce(ctx, 'w2', 10, undefined)).toEqual([]);
  });

  it('claims and starts in one statement, honouring kind and agent filters', async () => {
    const { ctx, types } = stepContext(getDb());
    const wanted = await submitted(ctx, { kind: 'mail', agentId: 'a1' });
    await submitted(ctx, { kind: 'mail', agentId: 'a2' });
    await submitted(ctx, { kind: 'chat', agentId: 'a1' });
    const items = await claimOnce(ctx, 'w1', 10, {
      kinds: ['mail'],
      agentIds: ['a1'],
      start: true,
      leaseMs: 500,
    });
    expect(items.map((item) => item.id)).toEqual([wanted.id]);
    expect(items[0]).toMatchObject({ state: 'running', startedAt: expect.any(Number) });
    expect(types().slice(-2)).toEqual(['work:claimed', 'work:started']);
    const others = await claimOnce(ctx, 'w2', 10, { excludeKinds: ['mail'] });
    expect(others.map((item) => item.kind)).toEqual(['chat']);
  });

  it('with nothing ready, reaps a lapsed lease (at most once a second) and claims what it freed', async () => {
    const { ctx, clock } = stepContext(getDb(), { leaseMs: 1_000, maxAttempts: 3 });
    const item = await submitted(ctx);
    await claimOnce(ctx, 'w1', 1, undefined);
    clock.advance(1_500);
    const [again] = await claimBatch(ctx, 'w2', 1);
    expect(again).toMatchObject({ id: item.id, leaseOwner: 'w2', attempts: 2 });
    expect(ctx.state.lastReapAt).toBe(clock.now());
    clock.advance(1_500);
    // Attempt 3 of 3 lapses too: this time the reap kills the item instead of re-queuing it.
    expect((await claimBatch(ctx, 'w3', 1))[0]?.leaseOwner).toBe('w3');
    clock.advance(1_100);
    await claimBatch(ctx, 'w4', 1);
    const reapedAt = ctx.state.lastReapAt;
    clock.advance(500);
    expect(await claimBatch(ctx, 'w5', 1)).toEqual([]);
    expect(ctx.state.lastReapAt).toBe(reapedAt);
    expect((await selectById(ctx, ctx.db, item.id))?.state).toBe('dead');
  });

  it('a closed queue claims nothing', async () => {
    const { ctx } = stepContext(getDb());
    await submitted(ctx);
    ctx.state.closed = true;
    expect(await claimBatch(ctx, 'w1', 1)).toEqual([]);
  });
});

it('builds no filter SQL for an empty filter, and one placeholder per value otherwise', () => {
  expect(claimFilterSql(undefined)).toEqual({ sql: '', params: [] });
  expect(claimFilterSql({ kinds: ['a', 'b'], excludeKinds: [], agentIds: ['x'] })).toEqual({
    sql: ' AND kind IN (?, ?) AND agent_id IN (?)',
    params: ['a', 'b', 'x'],
  });
});
