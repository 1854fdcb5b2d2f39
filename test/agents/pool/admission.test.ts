import { expect, it } from 'vitest';
import { admit } from '../../../src/agents/pool/admission.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { poolFixture } from './helpers.js';

describeEachDatabase('worker pool admission', (getDb) => {
  it('admits up to admissionQueueSize waiting tasks per class, then refuses with QUEUE_FULL', async () => {
    const { pool, events } = poolFixture(getDb(), {
      classes: { chat: { concurrency: 1, admissionQueueSize: 2 } },
    });
    await admit(pool, { kind: 'task', description: 'one', sessionKey: 'agent:main:main' });
    await admit(pool, { kind: 'task', description: 'two' });
    expect(pool.classes[0]!.admitted.size).toBe(2);
    await expect(
      admit(pool, { kind: 'task', description: 'three', sessionKey: 'agent:main:main' }),
    ).rejects.toMatchObject({
      code: 'QUEUE_FULL',
      retryable: true,
      details: { workerClass: 'chat', queueDepth: 2, limit: 2 },
    });
    expect(events.at(-1)).toMatchObject({
      type: 'agent:progress',
      sessionKey: 'agent:main:main',
      data: { phase: 'saturated', queueDepth: 2, limit: 2 },
    });
    expect(pool.classes[0]!.reserved).toBe(0);
  });

  it('a merged duplicate or a paused submission takes no admission slot; an unknown kind is refused', async () => {
    const { pool } = poolFixture(getDb(), {
      classes: { bg: { concurrency: 1, admissionQueueSize: 5, kinds: ['memory.maintain'] } },
    });
    await admit(pool, { kind: 'memory.maintain', description: 'a', dedupKey: 'k' });
    const merged = await admit(pool, { kind: 'memory.maintain', description: 'b', dedupKey: 'k' });
    expect(merged.merged).toBe(true);
    await admit(pool, { kind: 'memory.maintain', description: 'c', paused: true });
    expect(pool.classes[0]!.admitted.size).toBe(2);
    await expect(admit(pool, { kind: 'task', description: 'x' })).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
  });
});
