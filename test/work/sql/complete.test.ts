import { expect, it } from 'vitest';
import { claimOnce } from '../../../src/work/sql/claim.js';
import { complete, completeMany } from '../../../src/work/sql/complete.js';
import { selectById } from '../../../src/work/sql/read.js';
import { transition } from '../../../src/work/sql/transition.js';
import { WorkErrorCodes } from '../../../src/work/states.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { claimed, stepContext, submitted } from './helpers.js';

describeEachDatabase('work sql: complete', (getDb) => {
  it('records data and the time since start, clears the lease, and announces the end', async () => {
    const { ctx, clock, types } = stepContext(getDb());
    const item = await claimed(ctx, 'w1', { start: true });
    clock.advance(250);
    const done = await complete(ctx, item.id, 'w1', { data: { ok: true } });
    expect(done).toMatchObject({
      state: 'completed',
      leaseOwner: null,
      leaseExpiresAt: null,
      resolvedAt: clock.now(),
      outcome: { data: { ok: true }, durationMs: 250 },
    });
    expect(types().at(-1)).toBe('work:completed');
  });

  it('settles each entry of a batch alone: done, lease lost, unserialisable, repeated', async () => {
    const { ctx, clock } = stepContext(getDb(), { leaseMs: 1_000 });
    for (let i = 0; i < 3; i++) await submitted(ctx);
    const [a, b, c] = await claimOnce(ctx, 'w1', 3, { start: true });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const other = await submitted(ctx);
    await claimOnce(ctx, 'w2', 1, undefined);
    const results = await completeMany(ctx, 'w1', [
      { id: a!.id, durationMs: 7 },
      { id: b!.id, data: cyclic },
      { id: other.id },
      { id: a!.id },
      { id: c!.id, data: 'text' },
    ]);
    expect(results.map((result) => result.status)).toEqual([
      'fulfilled',
      'rejected',
      'rejected',
      'rejected',
      'fulfilled',
    ]);
    expect(results[0]).toMatchObject({ value: { outcome: { durationMs: 7 } } });
    expect(results[2]).toMatchObject({ reason: { code: WorkErrorCodes.leaseExpired } });
    expect(results[3]).toMatchObject({ reason: { code: WorkErrorCodes.invalidTransition } });
    expect((await selectById(ctx, ctx.db, b!.id))?.state).toBe('running');
    clock.advance(1_000);
    await expect(complete(ctx, b!.id, 'w1')).rejects.toMatchObject({ code: WorkErrorCodes.leaseExpired });
    expect(await completeMany(ctx, 'w1', [])).toEqual([]);
  });

  it('re-queues the blocked parent when its last awaited child completes', async () => {
    const { ctx, clock } = stepContext(getDb());
    const parent = await submitted(ctx, { priority: -1 });
    const child = await submitted(ctx, { parentId: parent.id, priority: 5 });
    await transition(
      ctx,
      ctx.db,
      parent.id,
      'blocked',
      { waiting_on: JSON.stringify([child.id]) },
      {
        now: clock.now(),
        from: ['queued'],
      },
    );
    const [claimedChild] = await claimOnce(ctx, 'w1', 1, { start: true });
    expect(claimedChild?.id).toBe(child.id);
    await complete(ctx, child.id, 'w1');
    expect((await selectById(ctx, ctx.db, parent.id))?.state).toBe('queued');
  });
});
