import { expect, it } from 'vitest';
import type { Effect } from '../../../src/work/sql/context.js';
import { withEffects } from '../../../src/work/sql/effects.js';
import { selectById } from '../../../src/work/sql/read.js';
import { afterTerminal, maybeUnblockParent, transition } from '../../../src/work/sql/transition.js';
import { WorkErrorCodes } from '../../../src/work/states.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { claimed, stepContext, submitted } from './helpers.js';

describeEachDatabase('work sql: guarded transition', (getDb) => {
  it('moves an item whose state and lease match, in one statement', async () => {
    const { ctx, clock } = stepContext(getDb());
    const item = await claimed(ctx, 'w1');
    clock.advance(5);
    const running = await transition(
      ctx,
      ctx.db,
      item.id,
      'running',
      { started_at: clock.now() },
      {
        now: clock.now(),
        from: ['claimed'],
        leaseOwner: 'w1',
      },
    );
    expect(running).toMatchObject({ state: 'running', startedAt: clock.now(), updatedAt: clock.now() });
  });

  it('refuses another worker, a lapsed lease and an illegal move, leaving the row as it was', async () => {
    const { ctx, clock } = stepContext(getDb(), { leaseMs: 1_000 });
    const item = await claimed(ctx, 'w1');
    await expect(
      transition(
        ctx,
        ctx.db,
        item.id,
        'running',
        {},
        { now: clock.now(), from: ['claimed'], leaseOwner: 'w2' },
      ),
    ).rejects.toMatchObject({ code: WorkErrorCodes.leaseExpired });
    clock.advance(1_000);
    await expect(
      transition(
        ctx,
        ctx.db,
        item.id,
        'running',
        {},
        { now: clock.now(), from: ['claimed'], leaseOwner: 'w1' },
      ),
    ).rejects.toMatchObject({
      code: WorkErrorCodes.leaseExpired,
      message: expect.stringContaining('expired'),
    });
    await expect(
      transition(ctx, ctx.db, item.id, 'completed', {}, { now: clock.now(), from: ['queued'] }),
    ).rejects.toMatchObject({ code: WorkErrorCodes.invalidTransition });
    await expect(
      transition(ctx, ctx.db, 'work-missing', 'paused', {}, { now: clock.now() }),
    ).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect((await selectById(ctx, ctx.db, item.id))?.state).toBe('claimed');
  });

  it('re-queues a blocked parent only once every child it awaits has ended, announcing after commit', async () => {
    const { ctx, clock, types } = stepContext(getDb());
    const parent = await submitted(ctx);
    const first = await submitted(ctx, { parentId: parent.id });
    const second = await submitted(ctx, { parentId: parent.id });
    await transition(
      ctx,
      ctx.db,
      parent.id,
      'blocked',
      { waiting_on: JSON.stringify([first.id, second.id]) },
      {
        now: clock.now(),
        from: ['queued'],
      },
    );
    const end = async (id: string) =>
      withEffects(ctx, async (tx, effects: Effect[]) => {
        const published = types().length;
        const cancelled = await transition(
          ctx,
          tx,
          id,
          'cancelled',
          { resolved_at: clock.now() },
          { now: clock.now() },
        );
        await afterTerminal(ctx, tx, cancelled, clock.now(), effects);
        // Nothing is announced before the commit.
        expect(types()).toHaveLength(published);
      });
    await end(first.id);
    expect((await selectById(ctx, ctx.db, parent.id))?.state).toBe('blocked');
    const sequenceBefore = ctx.state.wakeSequence;
    await end(second.id);
    const requeued = await selectById(ctx, ctx.db, parent.id);
    expect(requeued).toMatchObject({ state: 'queued', stateReason: 'children finished' });
    expect(types().filter((type) => type !== 'work:submitted')).toEqual([
      'work:cancelled',
      'work:cancelled',
      'work:unblocked',
    ]);
    expect(ctx.state.wakeSequence).toBeGreaterThan(sequenceBefore);
    // Nothing left to wait for: a second look changes nothing.
    expect(
      await withEffects(ctx, (tx, effects) => maybeUnblockParent(ctx, tx, parent.id, clock.now(), effects)),
    ).toBe(false);
  });

  it('drops the bus events of a transaction that rolled back', async () => {
    const { ctx, clock, types } = stepContext(getDb());
    const item = await submitted(ctx);
    await expect(
      withEffects(ctx, async (tx, effects) => {
        const cancelled = await transition(ctx, tx, item.id, 'cancelled', {}, { now: clock.now() });
        await afterTerminal(ctx, tx, cancelled, clock.now(), effects);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(types()).toEqual(['work:submitted']);
    expect((await selectById(ctx, ctx.db, item.id))?.state).toBe('queued');
  });
});
