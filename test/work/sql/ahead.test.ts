import { expect, it, vi } from 'vitest';
import { createWorkQueue } from '../../../src/work/index.js';
import { handBackAll } from '../../../src/work/sql/ahead.js';
import { cancel } from '../../../src/work/sql/cancel.js';
import { claimBatch } from '../../../src/work/sql/claim.js';
import { completeMany } from '../../../src/work/sql/complete.js';
import { createQueueContext } from '../../../src/work/sql/context.js';
import { fail } from '../../../src/work/sql/fail.js';
import { pause } from '../../../src/work/sql/pause.js';
import { selectById } from '../../../src/work/sql/read.js';
import { reapExpiredLeases } from '../../../src/work/sql/reap.js';
import { WorkErrorCodes } from '../../../src/work/states.js';
import { counted, describeEachDatabase } from '../../helpers/databases.js';
import { stepContext, submitted } from './helpers.js';

const start = { start: true } as const;

describeEachDatabase('work sql: claim-ahead', (getDb) => {
  it('on Postgres a completion claims as many ready items for the worker, handed out by its next claim without a statement', async () => {
    const { db, statements } = counted(getDb());
    const { ctx, events } = stepContext(db, { leaseMs: 60_000 });
    const ids: string[] = [];
    for (let index = 0; index < 5; index++) ids.push((await submitted(ctx)).id);
    const first = await claimBatch(ctx, 'w1', 2, start);
    expect(first.map((item) => item.id)).toEqual(ids.slice(0, 2));
    const results = await completeMany(
      ctx,
      'w1',
      first.map((item) => ({ id: item.id })),
    );
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'fulfilled']);
    const claimedEvents = () =>
      events.filter((event) => event.type === 'work:claimed').map((event) => event.data.workItemId);
    expect(claimedEvents()).toEqual(ids.slice(0, 2));
    const next = await selectById(ctx, ctx.db, ids[2]!);
    if (ctx.isPostgres) {
      expect(next).toMatchObject({ state: 'running', leaseOwner: 'w1', attempts: 1 });
      expect((await selectById(ctx, ctx.db, ids[4]!))?.state).toBe('queued');
      const before = statements();
      const second = await claimBatch(ctx, 'w1', 2, start);
      expect(statements()).toBe(before);
      expect(second.map((item) => item.id)).toEqual(ids.slice(2, 4));
      // Announced when handed out, not when claimed ahead.
      expect(claimedEvents()).toEqual(ids.slice(0, 4));
    } else {
      expect(next?.state).toBe('queued');
      expect((await claimBatch(ctx, 'w1', 2, start)).map((item) => item.id)).toEqual(ids.slice(2, 4));
    }
  });

  it('tops up a claim that wants more than was claimed ahead, and claims ahead for a refused completion too', async () => {
    const { ctx } = stepContext(getDb(), { leaseMs: 60_000 });
    const ids: string[] = [];
    for (let index = 0; index < 6; index++) ids.push((await submitted(ctx)).id);
    const [a, b] = await claimBatch(ctx, 'w1', 2, start);
    await cancel(ctx, b!.id);
    const results = await completeMany(ctx, 'w1', [{ id: a!.id }, { id: b!.id }]);
    expect(results[0]).toMatchObject({ status: 'fulfilled', value: { state: 'completed' } });
    expect(results[1]).toMatchObject({
      status: 'rejected',
      reason: { code: WorkErrorCodes.invalidTransition },
    });
    expect((await selectById(ctx, ctx.db, b!.id))?.state).toBe('cancelled');
    // Both slots are free again whatever their completion said, so both were claimed for.
    expect((await selectById(ctx, ctx.db, ids[3]!))?.state).toBe(ctx.isPostgres ? 'running' : 'queued');
    const next = await claimBatch(ctx, 'w1', 3, start);
    expect(next.map((item) => item.id)).toEqual(ids.slice(2, 5));
    expect(next.every((item) => item.state === 'running' && item.leaseOwner === 'w1')).toBe(true);
  });

  it('claims nothing ahead for a failed item, for another worker, or with claimAhead off', async () => {
    for (const claimAhead of [true, false]) {
      const { ctx } = stepContext(getDb(), { leaseMs: 60_000, claimAhead });
      const ids: string[] = [];
      for (let index = 0; index < 4; index++) ids.push((await submitted(ctx)).id);
      const [a, b] = await claimBatch(ctx, 'w1', 2, start);
      await fail(ctx, a!.id, 'w1', { code: 'BOOM', message: 'boom', retryable: false });
      await completeMany(ctx, 'w2', [{ id: b!.id }]);
      await completeMany(ctx, 'w1', [{ id: b!.id }]);
      const rest = await Promise.all(ids.slice(2).map((id) => selectById(ctx, ctx.db, id)));
      const expected = ctx.isPostgres && claimAhead ? ['running', 'queued'] : ['queued', 'queued'];
      expect(rest.map((item) => item?.state)).toEqual(expected);
      await handBackAll(ctx);
      await ctx.db.run('DELETE FROM work_items');
    }
  });

  it('claims ahead only while the worker is backlogged: not after a claim or a claim-ahead came back short', async () => {
    const { ctx } = stepContext(getDb(), { leaseMs: 60_000 });
    const state = async (id: string) => (await selectById(ctx, ctx.db, id))?.state;
    // An idle worker: its claim asked for more than was ready, so its completion claims nothing ahead.
    const [a, b] = [await submitted(ctx), await submitted(ctx)];
    expect(await claimBatch(ctx, 'w1', 3, start)).toHaveLength(2);
    const c = await submitted(ctx);
    await completeMany(ctx, 'w1', [{ id: a.id }]);
    expect(await state(c.id)).toBe('queued');
    // A claim that takes all it asks for means more may be waiting: completions claim ahead again.
    expect((await claimBatch(ctx, 'w1', 1, start)).map((item) => item.id)).toEqual([c.id]);
    const d = await submitted(ctx);
    await completeMany(ctx, 'w1', [{ id: c.id }]);
    expect(await state(d.id)).toBe(ctx.isPostgres ? 'running' : 'queued');
    // Handing d out takes no statement; completing it claims ahead again and finds the queue empty, so the
    // completion after that claims nothing ahead for e.
    expect((await claimBatch(ctx, 'w1', 1, start)).map((item) => item.id)).toEqual([d.id]);
    await completeMany(ctx, 'w1', [{ id: d.id }]);
    const e = await submitted(ctx);
    await completeMany(ctx, 'w1', [{ id: b.id }]);
    expect(await state(e.id)).toBe('queued');
    expect(ctx.state.ahead.size).toBe(0);
  });

  it('hands back items nobody took within the hold, keeping their attempts and their place in line', async () => {
    const { ctx, events } = stepContext(getDb(), { leaseMs: 400 });
    const ids: string[] = [];
    for (let index = 0; index < 3; index++) ids.push((await submitted(ctx)).id);
    const [first] = await claimBatch(ctx, 'w1', 1, start);
    await completeMany(ctx, 'w1', [{ id: first!.id }]);
    await vi.waitFor(async () => expect((await selectById(ctx, ctx.db, ids[1]!))?.state).toBe('queued'), {
      timeout: 5_000,
    });
    expect(await selectById(ctx, ctx.db, ids[1]!)).toMatchObject({
      leaseOwner: null,
      leaseExpiresAt: null,
      attempts: 0,
    });
    // Only its submission: its claim ahead and hand-back were never announced.
    expect(events.filter((event) => event.workItemId === ids[1])).toHaveLength(1);
    expect((await claimBatch(ctx, 'w2', 1, start))[0]?.id).toBe(ids[1]);
  });

  it('leaves items claimed ahead by a crashed worker to be reclaimed when their lease lapses', async () => {
    const { ctx, clock } = stepContext(getDb(), { leaseMs: 60_000 });
    const ids: string[] = [];
    for (let index = 0; index < 3; index++) ids.push((await submitted(ctx)).id);
    const [first] = await claimBatch(ctx, 'w1', 1, start);
    await completeMany(ctx, 'w1', [{ id: first!.id }]);
    // The process dies: nothing it held in memory is handed back.
    for (const buffer of ctx.state.ahead.values()) clearTimeout(buffer.timer);
    const survivor = createQueueContext({ db: ctx.db, clock, config: { leaseMs: 60_000 } });
    expect((await claimBatch(survivor, 'w2', 3, start)).map((item) => item.id)).toEqual(
      ctx.isPostgres ? [ids[2]] : [ids[1], ids[2]],
    );
    if (!ctx.isPostgres) return;
    clock.advance(60_000);
    expect((await reapExpiredLeases(survivor)).requeued).toContain(ids[1]);
    const [reclaimed] = await claimBatch(survivor, 'w2', 1, start);
    expect(reclaimed).toMatchObject({ id: ids[1], leaseOwner: 'w2', attempts: 2 });
  });

  it('hands back what was claimed ahead when the queue closes', async () => {
    const queue = createWorkQueue({ db: getDb(), config: { leaseMs: 60_000 } });
    const first = await queue.submit({ kind: 'task', description: 'first' });
    const second = await queue.submit({ kind: 'task', description: 'second' });
    await queue.claimBatch('w1', 1, start);
    await queue.complete(first.id, 'w1');
    await queue.close();
    expect(await queue.get(second.id)).toMatchObject({ state: 'queued', leaseOwner: null, attempts: 0 });
  });

  it("a second close waits for the first one's hand-back", async () => {
    const db = getDb();
    let gate: Promise<void> | undefined;
    let openGate!: () => void;
    // The database as the queue sees it, whose transactions wait for the gate once it is set.
    const gated = new Proxy(db, {
      get(target, property) {
        if (property === 'transaction')
          return async (...args: Parameters<typeof db.transaction>) => {
            await gate;
            return target.transaction(...args);
          };
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const queue = createWorkQueue({ db: gated, config: { leaseMs: 60_000 } });
    const first = await queue.submit({ kind: 'task', description: 'first' });
    const second = await queue.submit({ kind: 'task', description: 'second' });
    await queue.claimBatch('w1', 1, start);
    await queue.complete(first.id, 'w1');
    if (db.dialect !== 'postgres') return;
    gate = new Promise((resolve) => {
      openGate = resolve;
    });
    const firstClose = queue.close();
    let secondClosed = false;
    const secondClose = queue.close().then(() => {
      secondClosed = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    // The hand-back of the item claimed ahead is held at the gate: no close may have resolved.
    expect(secondClosed).toBe(false);
    openGate();
    await secondClose;
    expect(await queue.get(second.id)).toMatchObject({ state: 'queued', leaseOwner: null, attempts: 0 });
    await firstClose;
  });

  it('hands back at once what a completion on its way when the queue closed claimed ahead', async () => {
    const { ctx } = stepContext(getDb(), { leaseMs: 60_000 });
    const ids: string[] = [];
    for (let index = 0; index < 2; index++) ids.push((await submitted(ctx)).id);
    const [first] = await claimBatch(ctx, 'w1', 1, start);
    const completing = completeMany(ctx, 'w1', [{ id: first!.id }]);
    ctx.state.closed = true;
    expect((await completing)[0]?.status).toBe('fulfilled');
    expect(ctx.state.ahead.size).toBe(0);
    await vi.waitFor(
      async () =>
        expect(await selectById(ctx, ctx.db, ids[1]!)).toMatchObject({ state: 'queued', attempts: 0 }),
      { timeout: 5_000 },
    );
  });

  it('does not hand out an item claimed ahead that was cancelled or paused meanwhile', async () => {
    const { ctx } = stepContext(getDb(), { leaseMs: 60_000 });
    const ids: string[] = [];
    for (let index = 0; index < 5; index++) ids.push((await submitted(ctx)).id);
    const first = await claimBatch(ctx, 'w1', 2, start);
    await completeMany(
      ctx,
      'w1',
      first.map((item) => ({ id: item.id })),
    );
    await cancel(ctx, ids[2]!);
    await pause(ctx, ids[3]!);
    const next = await claimBatch(ctx, 'w1', 1, start);
    expect(next.map((item) => item.id)).toEqual([ids[4]]);
    expect(ctx.state.ahead.size).toBe(0);
  });
});
