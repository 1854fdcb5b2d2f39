import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { forgetDeadlines, noteDeadline, wake } from '../../../src/work/sql/context.js';
import { waitForWork } from '../../../src/work/sql/wait.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { stepContext, submitted } from './helpers.js';

describeEachDatabase('work sql: wait for work', (getDb) => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('returns at once for a stale wake sequence, an aborted signal or a closed queue', async () => {
    const { ctx } = stepContext(getDb());
    const sequence = ctx.state.wakeSequence;
    wake(ctx.state);
    await waitForWork(ctx, undefined, { sinceSequence: sequence });
    const aborted = new AbortController();
    aborted.abort();
    await waitForWork(ctx, aborted.signal);
    ctx.state.closed = true;
    await waitForWork(ctx);
    expect(ctx.state.waiters.size).toBe(0);
  });

  it('a wake-up or an abort ends the wait and unregisters the waiter', async () => {
    const { ctx } = stepContext(getDb());
    const waiting = waitForWork(ctx);
    expect(ctx.state.waiters.size).toBe(1);
    wake(ctx.state);
    await waiting;
    const controller = new AbortController();
    const aborting = waitForWork(ctx, controller.signal);
    controller.abort();
    await aborting;
    expect(ctx.state.waiters.size).toBe(0);
  });

  it('due work the filter may claim ends the wait; other kinds wait for the poll interval', async () => {
    const { ctx } = stepContext(getDb(), { pollIntervalMs: 5_000 });
    await submitted(ctx, { kind: 'mail' });
    await waitForWork(ctx, undefined, { filter: { kinds: ['mail'] } });
    let ended = false;
    const other = waitForWork(ctx, undefined, { filter: { kinds: ['chat'] } }).then(() => {
      ended = true;
    });
    await vi.waitFor(() => expect(vi.getTimerCount()).toBe(1), { timeout: 10_000 });
    expect(ended).toBe(false);
    await vi.advanceTimersByTimeAsync(5_000);
    await other;
    expect(ended).toBe(true);
  });

  it('with remote changes heard, reuses the deadlines it read until a change here moves them or another process drops them', async () => {
    const { ctx, clock } = stepContext(getDb(), { pollIntervalMs: 5_000 });
    ctx.state.hearsRemoteChanges = true;
    let reads = 0;
    const get = ctx.db.get;
    ctx.db.get = (sql, params) => {
      if (sql.includes('MIN(run_after)')) reads++;
      return get(sql, params);
    };
    await submitted(ctx, { delayMs: 4_000 });
    const waitUntilWoken = async () => {
      const waiting = waitForWork(ctx);
      await vi.waitFor(() => expect(vi.getTimerCount()).toBe(1), { timeout: 10_000 });
      const timers = vi.getTimerCount();
      wake(ctx.state);
      await waiting;
      return timers;
    };
    await waitUntilWoken();
    await waitUntilWoken();
    expect(reads).toBe(1);
    // A deadline made here, sooner than the one read: the next wait ends at it without reading again.
    noteDeadline(ctx.state, clock.now() + 1_000);
    let ended = false;
    const sooner = waitForWork(ctx).then(() => {
      ended = true;
    });
    await vi.advanceTimersByTimeAsync(999);
    expect(ended).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await sooner;
    expect(reads).toBe(1);
    forgetDeadlines(ctx.state);
    await waitUntilWoken();
    expect(reads).toBe(2);
  });
});
