import { expect, it, vi } from 'vitest';
import { createWorkQueue } from '../../../src/work/index.js';
import { cancel } from '../../../src/work/sql/cancel.js';
import { claimBatch } from '../../../src/work/sql/claim.js';
import { selectById } from '../../../src/work/sql/read.js';
import { submit } from '../../../src/work/sql/submit.js';
import { waitForWork } from '../../../src/work/sql/wait.js';
import type { ClaimFilter, WorkSubmission } from '../../../src/work/types.js';
import { counted, describeEachDatabase } from '../../helpers/databases.js';
import { stepContext } from './helpers.js';

const start = { start: true } as const;

describeEachDatabase('work sql: hand-off to an idle worker', (getDb) => {
  it('hands a submission to a worker waiting for it: started under its lease, taken without a statement', async () => {
    const { db, statements } = counted(getDb());
    const { ctx, clock, events } = stepContext(db, { leaseMs: 60_000 });
    const waiting = waitForWork(ctx, undefined, { filter: start, handOff: { workerId: 'w1', slots: 2 } });
    const { id } = await submit(ctx, { kind: 'task', description: 'do it' });
    await waiting;
    expect(ctx.state.idle.size).toBe(0);
    const stored = await selectById(ctx, ctx.db, id);
    expect(stored).toMatchObject({
      state: 'running',
      leaseOwner: 'w1',
      leaseExpiresAt: clock.now() + 60_000,
      startedAt: clock.now(),
      attempts: 1,
    });
    const before = statements();
    const taken = await claimBatch(ctx, 'w1', 2, start);
    expect(statements()).toBe(before);
    expect(taken).toMatchObject([{ id, state: 'running', leaseOwner: 'w1', attempts: 1 }]);
    // The same events as a submission claimed from the table: queued first, claimed and started when taken.
    expect(events.map((event) => [event.type, (event.data as { state?: string }).state])).toEqual([
      ['work:submitted', 'queued'],
      ['work:claimed', 'claimed'],
      ['work:started', 'running'],
    ]);
  });

  it('hands off no more than the free slots, nor work the filter would not claim, nor delayed or paused work', async () => {
    const { ctx } = stepContext(getDb(), { leaseMs: 60_000 });
    const stateOf = async (id: string) => (await selectById(ctx, ctx.db, id))?.state;
    // Any submission here wakes the worker, which ends its wait: each case waits anew.
    const handedOff = async (filter: ClaimFilter, submissions: Array<Partial<WorkSubmission>>) => {
      const waiting = waitForWork(ctx, undefined, { filter, handOff: { workerId: 'w1', slots: 1 } });
      const results = await Promise.all(
        submissions.map((submission) => submit(ctx, { kind: 'task', description: 'x', ...submission })),
      );
      await waiting;
      const states = await Promise.all(results.map((result) => stateOf(result.id)));
      await ctx.db.run('DELETE FROM work_items');
      ctx.state.ahead.clear();
      return states.map((state) => state === 'running');
    };
    expect(await handedOff(start, [{}, {}])).toEqual([true, false]);
    expect(await handedOff({ ...start, kinds: ['task'] }, [{ kind: 'other' }])).toEqual([false]);
    expect(await handedOff({ ...start, excludeKinds: ['other'] }, [{ kind: 'other' }])).toEqual([false]);
    expect(await handedOff({ ...start, agentIds: ['a1'] }, [{ agentId: 'a2' }])).toEqual([false]);
    expect(await handedOff({ ...start, agentIds: ['a1'] }, [{ agentId: 'a1' }])).toEqual([true]);
    expect(await handedOff(start, [{ delayMs: 1_000 }])).toEqual([false]);
    expect(await handedOff(start, [{ paused: true }])).toEqual([false]);
    // A claim that does not start what it takes has no buffer to be handed items in.
    expect(await handedOff({ start: false }, [{}])).toEqual([false]);
  });

  it('hands off child work and work with a dedup key too; one merged into a live item leaves the slot free', async () => {
    const { ctx } = stepContext(getDb(), { leaseMs: 60_000 });
    const stateOf = async (id: string) => (await selectById(ctx, ctx.db, id))?.state;
    // Of a kind the worker does not take: a parent it could claim would end its wait as work that is due.
    const parent = await submit(ctx, { kind: 'plan', description: 'parent' });
    const tasks = { ...start, kinds: ['task'] };
    const childWait = waitForWork(ctx, undefined, { filter: tasks, handOff: { workerId: 'w1', slots: 2 } });
    const child = await submit(ctx, { kind: 'task', description: 'child', parentId: parent.id });
    await childWait;
    expect(await stateOf(child.id)).toBe('running');
    expect(await selectById(ctx, ctx.db, child.id)).toMatchObject({ parentId: parent.id, depth: 1 });

    const firstWait = waitForWork(ctx, undefined, { filter: tasks, handOff: { workerId: 'w1', slots: 1 } });
    const first = await submit(ctx, { kind: 'task', description: 'keyed', dedupKey: 'k' });
    await firstWait;
    expect(await stateOf(first.id)).toBe('running');
    const stop = new AbortController();
    const secondWait = waitForWork(ctx, stop.signal, {
      filter: tasks,
      handOff: { workerId: 'w1', slots: 1 },
    });
    const second = await submit(ctx, { kind: 'task', description: 'keyed again', dedupKey: 'k' });
    expect(second).toMatchObject({ id: first.id, merged: true });
    expect([...ctx.state.idle].map((claimer) => claimer.slots)).toEqual([1]);
    stop.abort();
    await secondWait;
  });

  it('hands off nothing with handOffToIdle off, or once the wait has ended', async () => {
    const off = stepContext(getDb(), { leaseMs: 60_000, handOffToIdle: false }).ctx;
    const offWait = waitForWork(off, undefined, { filter: start, handOff: { workerId: 'w1', slots: 1 } });
    expect(off.state.idle.size).toBe(0);
    const offItem = await submit(off, { kind: 'task', description: 'x' });
    await offWait;
    expect((await selectById(off, off.db, offItem.id))?.state).toBe('queued');
    await off.db.run('DELETE FROM work_items');

    const { ctx } = stepContext(getDb(), { leaseMs: 60_000 });
    const stop = new AbortController();
    const waiting = waitForWork(ctx, stop.signal, { filter: start, handOff: { workerId: 'w1', slots: 1 } });
    expect(ctx.state.idle.size).toBe(1);
    stop.abort();
    await waiting;
    expect(ctx.state.idle.size).toBe(0);
    const { id } = await submit(ctx, { kind: 'task', description: 'x' });
    expect((await selectById(ctx, ctx.db, id))?.state).toBe('queued');
  });

  it('gives an item handed off and never taken back to the queue as it was, after the hold', async () => {
    // A hold of 500 ms (a quarter of the lease).
    const { ctx, events } = stepContext(getDb(), { leaseMs: 2_000 });
    const waiting = waitForWork(ctx, undefined, { filter: start, handOff: { workerId: 'w1', slots: 1 } });
    const { id } = await submit(ctx, { kind: 'task', description: 'x' });
    await waiting;
    expect((await selectById(ctx, ctx.db, id))?.state).toBe('running');
    await vi.waitFor(
      async () =>
        expect(await selectById(ctx, ctx.db, id)).toMatchObject({
          state: 'queued',
          leaseOwner: null,
          leaseExpiresAt: null,
          startedAt: null,
          attempts: 0,
        }),
      { timeout: 5_000 },
    );
    expect(ctx.state.ahead.size).toBe(0);
    expect(events.map((event) => event.type)).toEqual(['work:submitted']);
    expect((await claimBatch(ctx, 'w2', 1, start)).map((item) => item.id)).toEqual([id]);
  });

  it('does not hand out an item handed off and cancelled before the worker took it', async () => {
    const { ctx } = stepContext(getDb(), { leaseMs: 60_000 });
    const waiting = waitForWork(ctx, undefined, { filter: start, handOff: { workerId: 'w1', slots: 1 } });
    const { id } = await submit(ctx, { kind: 'task', description: 'x' });
    await waiting;
    expect(ctx.state.ahead.size).toBe(1);
    await cancel(ctx, id);
    expect(ctx.state.ahead.size).toBe(0);
    expect(await claimBatch(ctx, 'w1', 1, start)).toEqual([]);
    expect((await selectById(ctx, ctx.db, id))?.state).toBe('cancelled');
  });

  it('gives what was handed off back to the queue when the queue closes', async () => {
    const queue = createWorkQueue({ db: getDb(), config: { leaseMs: 60_000 } });
    const waiting = queue.waitForWork(undefined, { filter: start, handOff: { workerId: 'w1', slots: 1 } });
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    await waiting;
    expect((await queue.get(id))?.state).toBe('running');
    await queue.close();
    expect(await queue.get(id)).toMatchObject({ state: 'queued', leaseOwner: null, attempts: 0 });
  });
});
