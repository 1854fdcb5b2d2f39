import { expect, it } from 'vitest';
import { backoffMs, fail } from '../../../src/work/sql/fail.js';
import { WorkErrorCodes } from '../../../src/work/states.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { claimed, stepContext } from './helpers.js';

const retryable = { code: 'TIMEOUT', message: 'took too long', retryable: true };

describeEachDatabase('work sql: fail', (getDb) => {
  it('a retryable error with attempts left goes back to the queue after the backoff', async () => {
    const { ctx, clock, events } = stepContext(getDb(), { backoffBaseMs: 100, maxAttempts: 3 });
    const item = await claimed(ctx, 'w1', { start: true });
    const before = ctx.state.wakeSequence;
    const requeued = await fail(ctx, item.id, 'w1', retryable);
    expect(requeued).toMatchObject({
      state: 'queued',
      runAfter: clock.now() + 100,
      resolvedAt: null,
      leaseOwner: null,
      stateReason: 'retry after: took too long',
    });
    expect(events.at(-1)).toMatchObject({
      type: 'work:failed',
      data: { willRetry: true, attempt: 1, retryAt: clock.now() + 100 },
    });
    expect(ctx.state.wakeSequence).toBe(before + 1);
  });

  it('ends failed on a permanent error and dead when attempts are used up', async () => {
    const { ctx, types } = stepContext(getDb(), { maxAttempts: 1 });
    const permanent = await claimed(ctx, 'w1', { start: true });
    const failed = await fail(ctx, permanent.id, 'w1', { ...retryable, retryable: false });
    expect(failed).toMatchObject({ state: 'failed', outcome: { error: { code: 'TIMEOUT' } } });
    const lastTry = await claimed(ctx, 'w1', { start: true });
    expect((await fail(ctx, lastTry.id, 'w1', retryable)).state).toBe('dead');
    expect(types().filter((type) => type === 'work:failed' || type === 'work:dead')).toEqual([
      'work:failed',
      'work:dead',
    ]);
  });

  it('refuses a worker that does not hold the lease, and an unknown id', async () => {
    const { ctx } = stepContext(getDb());
    const item = await claimed(ctx, 'w1');
    await expect(fail(ctx, item.id, 'w2', retryable)).rejects.toMatchObject({
      code: WorkErrorCodes.leaseExpired,
    });
    await expect(fail(ctx, 'work-nope', 'w1', retryable)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('doubles the backoff per attempt up to the cap', () => {
    const { ctx } = stepContext(getDb(), { backoffBaseMs: 100, backoffMaxMs: 500 });
    expect([1, 2, 3, 4, 5].map((attempt) => backoffMs(ctx, attempt))).toEqual([100, 200, 400, 500, 500]);
  });
});
