import { expect, it } from 'vitest';
import { cancelItems, pauseItems, resumeItems, select, snapshot } from '../../../src/agents/pool/control.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { poolFixture } from './helpers.js';

describeEachDatabase('worker pool control', (getDb) => {
  it('pauses, resumes and cancels the items of a session, oldest first', async () => {
    const { pool, queue } = poolFixture(getDb());
    const first = await queue.submit({ kind: 'task', description: 'a', sessionKey: 'agent:main:one' });
    const second = await queue.submit({ kind: 'task', description: 'b', sessionKey: 'agent:main:one' });
    await queue.submit({ kind: 'task', description: 'c', sessionKey: 'agent:main:two' });
    await expect(select(pool, {}, ['queued'])).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
    expect(await pauseItems(pool, { sessionKey: 'agent:main:one' })).toEqual([first.id, second.id]);
    expect(await resumeItems(pool, { ids: [second.id, 'work-nope'] })).toEqual([second.id]);
    expect(await cancelItems(pool, { sessionKey: 'agent:main:one' })).toEqual([first.id, second.id]);
    expect((await queue.counts({ sessionKey: 'agent:main:one' })).cancelled).toBe(2);
  });

  it('without a selector, pause and resume stop and restart claiming', async () => {
    const { pool } = poolFixture(getDb());
    let woken = 0;
    pool.classes[0]!.waiters.add(() => woken++);
    expect(await pauseItems(pool)).toEqual([]);
    expect(pool.paused).toBe(true);
    await resumeItems(pool);
    expect(pool.paused).toBe(false);
    expect(woken).toBe(1);
  });

  it('reports classes, queue counts and what runs here', async () => {
    const { pool, queue } = poolFixture(getDb());
    await queue.submit({ kind: 'task', description: 'a', agentId: 'main' });
    const view = await snapshot(pool, { agentId: 'main' });
    expect(view).toEqual({
      workerId: pool.workerId,
      running: false,
      paused: false,
      classes: { chat: { concurrency: 2, active: 0, waiting: 0, admissionQueueSize: 16 } },
      counts: { queued: 1, active: 0, paused: 0, blocked: 0 },
      active: [],
    });
  });
});
