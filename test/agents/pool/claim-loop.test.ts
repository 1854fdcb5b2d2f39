import { expect, it } from 'vitest';
import { claimLoop, filterFor } from '../../../src/agents/pool/claim-loop.js';
import { wakeAll } from '../../../src/agents/pool/state.js';
import type { RunItem } from '../../../src/agents/pool/types.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { recordingReads } from '../../helpers/query-plans.js';
import { deferred } from '../helpers.js';
import { poolFixture } from './helpers.js';

describeEachDatabase('worker pool claim loop', (getDb) => {
  it('claims only its class’s kinds; the default class takes every kind no class lists', () => {
    const { pool } = poolFixture(getDb(), {
      classes: {
        chat: { concurrency: 1, admissionQueueSize: 1 },
        bg: { concurrency: 1, admissionQueueSize: 1, kinds: ['memory.maintain'] },
      },
    });
    expect(filterFor(pool, pool.classes[0]!)).toEqual({ start: true, excludeKinds: ['memory.maintain'] });
    expect(filterFor(pool, pool.classes[1]!)).toEqual({ start: true, kinds: ['memory.maintain'] });
  });

  it('never runs more than the class’s concurrency, and stops when the pool stops', async () => {
    const gate = deferred();
    let running = 0;
    let most = 0;
    const runItem: RunItem = async () => {
      running++;
      most = Math.max(most, running);
      await gate.promise;
      running--;
      return { summary: 'ok' };
    };
    const { pool, queue } = poolFixture(getDb(), {
      runItem,
      classes: { chat: { concurrency: 2, admissionQueueSize: 10 } },
    });
    for (let index = 0; index < 5; index++) await queue.submit({ kind: 'task', description: `job ${index}` });
    const state = pool.classes[0]!;
    const loops = [claimLoop(pool, state), claimLoop(pool, state)];
    await expect.poll(() => state.active, { timeout: 10_000 }).toBe(2);
    expect((await queue.counts()).queued).toBe(3);
    gate.resolve();
    await expect.poll(async () => (await queue.counts()).completed, { timeout: 10_000 }).toBe(5);
    expect(most).toBe(2);
    pool.stopped = true;
    pool.loopController.abort();
    wakeAll(pool);
    await Promise.all(loops);
  });

  it('an idle loop is handed a submission it would claim and starts it without a claim statement', async () => {
    // Claims, from the table or ahead, are `all` calls on both dialects.
    const { db, statements } = recordingReads(getDb());
    const { pool, queue, types } = poolFixture(db, {
      classes: { chat: { concurrency: 2, admissionQueueSize: 10 } },
    });
    const state = pool.classes[0]!;
    const loop = claimLoop(pool, state);
    await expect.poll(() => state.waitingForWork, { timeout: 10_000 }).toBe(1);
    const claims = () =>
      statements.filter(({ sql }) => /work_claim\(|UPDATE work_items SET state = 'running'/.test(sql));
    const claimsWhileIdle = claims().length;
    const { id } = await queue.submit({ kind: 'task', description: 'handed off' });
    await expect.poll(async () => (await queue.get(id))?.state, { timeout: 10_000 }).toBe('completed');
    expect(claims().length - claimsWhileIdle).toBe(0);
    expect(types().filter((type) => type.startsWith('work:'))).toEqual([
      'work:submitted',
      'work:claimed',
      'work:started',
      'work:completed',
    ]);
    pool.stopped = true;
    pool.loopController.abort();
    wakeAll(pool);
    await loop;
  });
});
