import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { wake } from '../../../src/work/sql/context.js';
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
});
