import { expect, it } from 'vitest';
import { cancelItems, pauseItems, resumeItems, select, snapshot } from '../../../src/agents/pool/control.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { createFaultyDatabase } from '../../helpers/faulty-database.js';
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

  it('a refused write reaches the caller, naming the items changed before it', async () => {
    const db = createFaultyDatabase(getDb());
    const { pool, queue, bus } = poolFixture(db);
    const session = { sessionKey: 'agent:main:one' };
    const first = await queue.submit({ kind: 'task', description: 'a', ...session });
    const second = await queue.submit({ kind: 'task', description: 'b', ...session });
    // The disk fills up once the first item's cancel is committed.
    const filling = bus.on('work:cancelled', () => db.failWrites());
    const refused = await cancelItems(pool, session).catch((error: unknown) => error);
    expect(refused).toMatchObject({
      code: 'STORE_UNAVAILABLE',
      retryable: true,
      details: { workItemId: second.id, done: [first.id] },
    });
    expect((await queue.get(first.id))?.state).toBe('cancelled');
    expect((await queue.get(second.id))?.state).toBe('queued');
    filling();
    db.heal();
    // Tried again, the request does what is left.
    expect(await cancelItems(pool, session)).toEqual([second.id]);
  });

  it('pause and resume on a full disk fail with STORE_UNAVAILABLE, not with nothing done', async () => {
    const db = createFaultyDatabase(getDb());
    const { pool, queue } = poolFixture(db);
    const session = { sessionKey: 'agent:main:one' };
    const { id } = await queue.submit({ kind: 'task', description: 'a', ...session });
    db.failWrites();
    await expect(pauseItems(pool, session)).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      details: { workItemId: id, done: [] },
    });
    db.heal();
    expect(await pauseItems(pool, session)).toEqual([id]);
    db.failWrites();
    await expect(resumeItems(pool, { ids: [id] })).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    db.heal();
    expect((await queue.get(id))?.state).toBe('paused');
  });

  it('skips an item that moved on between the read and the change', async () => {
    const { pool, queue } = poolFixture(getDb());
    const session = { sessionKey: 'agent:main:one' };
    const parent = await queue.submit({ kind: 'task', description: 'a', ...session });
    // Cancelled with its parent, the child refuses its own cancel: it has nothing left to do.
    const child = await queue.submit({ kind: 'task', description: 'b', parentId: parent.id, ...session });
    expect(await cancelItems(pool, session)).toEqual([parent.id]);
    expect((await queue.get(child.id))?.state).toBe('cancelled');
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
