import { expect, it } from 'vitest';
import { launch } from '../../../src/agents/pool/run-item.js';
import type { RunItem } from '../../../src/agents/pool/types.js';
import { AgentdError } from '../../../src/util/errors.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { deferred } from '../helpers.js';
import { poolFixture } from './helpers.js';

describeEachDatabase('worker pool: running an item', (getDb) => {
  const claimOne = async (fixture: ReturnType<typeof poolFixture>) => {
    await fixture.queue.submit({ kind: 'task', description: 'job', maxAttempts: 2 });
    const [item] = await fixture.queue.claimBatch(fixture.pool.workerId, 1, { start: true });
    return item!;
  };

  it('completes the item with what the runner returned, and frees the slot', async () => {
    const fixture = poolFixture(getDb());
    const { pool, queue } = fixture;
    const item = await claimOne(fixture);
    const state = pool.classes[0]!;
    launch(pool, state, item);
    expect(state.active).toBe(1);
    await pool.running.get(item.id)!.done;
    expect(state.active).toBe(0);
    expect(pool.running.size).toBe(0);
    expect(await queue.get(item.id)).toMatchObject({
      state: 'completed',
      outcome: { data: { summary: 'done' } },
    });
    expect(
      fixture.events.filter((event) => event.type === 'agent:progress').map((event) => event.data),
    ).toEqual([
      expect.objectContaining({ phase: 'worker-started' }),
      expect.objectContaining({ phase: 'worker-completed', message: 'completed "job": done' }),
    ]);
  });

  it('records a failure, which the queue retries when retryable', async () => {
    const runItem: RunItem = async () => {
      throw new AgentdError({ code: 'PROVIDER_ERROR', message: 'flaky', retryable: true, fault: 'provider' });
    };
    const fixture = poolFixture(getDb(), { runItem });
    const item = await claimOne(fixture);
    launch(fixture.pool, fixture.pool.classes[0]!, item);
    await fixture.pool.running.get(item.id)!.done;
    const after = await fixture.queue.get(item.id);
    expect(after?.state).toBe('queued');
    expect(fixture.events.at(-1)?.data).toMatchObject({ phase: 'worker-failed' });
  });

  it('a stopping pool aborts the runner and hands the item back without spending an attempt', async () => {
    const started = deferred();
    const runItem: RunItem = (_item, context) =>
      new Promise((_resolve, reject) => {
        started.resolve();
        context.signal.addEventListener('abort', () => reject(context.signal.reason));
      });
    const fixture = poolFixture(getDb(), { runItem });
    const item = await claimOne(fixture);
    launch(fixture.pool, fixture.pool.classes[0]!, item);
    await started.promise;
    fixture.pool.stopped = true;
    fixture.pool.running.get(item.id)!.controller.abort('worker pool stopping');
    await fixture.pool.running.get(item.id)?.done;
    await new Promise((resolve) => setImmediate(resolve));
    expect(await fixture.queue.get(item.id)).toMatchObject({ state: 'queued', attempts: 0 });
  });
});
