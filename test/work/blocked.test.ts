import { expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { createLedger, type Ledger } from '../../src/ledger/index.js';
import type { ToolContext } from '../../src/tools/index.js';
import { silentLogger } from '../../src/util/index.js';
import {
  blockWorkItem,
  createReportBlockedTool,
  createWorkQueue,
  unblockWorkItem,
} from '../../src/work/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createFaultyDatabase, type FaultyDatabase } from '../helpers/faulty-database.js';

function contextFor(workItemId: string | undefined): ToolContext {
  return {
    runId: 'run_1',
    agentId: 'main',
    toolCallId: 'call_1',
    workspaceDir: '/tmp',
    signal: new AbortController().signal,
    bus: createBus(),
    logger: silentLogger,
    ...(workItemId ? { workItemId } : {}),
  };
}

/** A ledger on `db` whose disk fills up just before (`fillBefore`) or just after (`fillAfter`) an append. */
function fillingLedger(db: FaultyDatabase, when: 'fillBefore' | 'fillAfter'): Ledger {
  const ledger = createLedger({ db });
  return {
    ...ledger,
    async append(workItemId, entry) {
      if (when === 'fillBefore') db.failWrites();
      const appended = await ledger.append(workItemId, entry);
      if (when === 'fillAfter') db.failWrites();
      return appended;
    },
  };
}

describeEachDatabase('blocked work', (getDb) => {
  it('report_blocked takes a running item from its worker, with the reason in state and ledger', async () => {
    const db = getDb();
    const bus = createBus();
    const events: string[] = [];
    bus.subscribe({ types: ['work:*'] }, (event) => events.push(event.type));
    const queue = createWorkQueue({ db, bus });
    const ledger = createLedger({ db });
    const tool = createReportBlockedTool({ queue, ledger });
    const { id } = await queue.submit({ kind: 'task', description: 'deploy' });
    await queue.claim('w1');
    await queue.start(id, 'w1');
    const result = await tool.execute(
      tool.input.parse({ reason: ' No token. ', needs: 'a token' }),
      contextFor(id),
    );
    expect(typeof result === 'string' ? result : result.content).toContain(
      'is blocked: No token. (needs: a token)',
    );
    const item = (await queue.get(id))!;
    expect(item).toMatchObject({
      state: 'blocked',
      stateReason: 'No token. (needs: a token)',
      leaseOwner: null,
    });
    expect(events).toContain('work:blocked');
    // The worker that lost it cannot complete it any more.
    await expect(queue.complete(id, 'w1', { data: { summary: 'done anyway' } })).rejects.toBeDefined();
    expect((await ledger.read(id)).map((entry) => entry.content)).toEqual([
      'Blocked: No token. (needs: a token)',
    ]);
    await queue.close();
  });

  it('refuses runs without a running work item, and input past the limits', async () => {
    const db = getDb();
    const queue = createWorkQueue({ db });
    const tool = createReportBlockedTool({ queue });
    await expect(tool.execute({ reason: 'x' }, contextFor(undefined))).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
    // A chat run's pseudo work item, and a queued item nobody runs, cannot be blocked from a tool.
    await expect(tool.execute({ reason: 'x' }, contextFor('session:abc'))).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    await expect(tool.execute({ reason: 'x' }, contextFor(id))).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
    expect(tool.input.safeParse({ reason: 'x'.repeat(2_001) }).success).toBe(false);
    expect(tool.input.safeParse({ reason: '   ' }).success).toBe(false);
    expect(tool.input.safeParse({}).success).toBe(false);
    await queue.close();
  });

  it('block and unblock from outside: queued items, conflicts, and the answer in the ledger', async () => {
    const db = getDb();
    const queue = createWorkQueue({ db });
    const ledger = createLedger({ db });
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    await blockWorkItem(queue, ledger, id, { reason: 'waiting for legal' });
    await expect(blockWorkItem(queue, ledger, id, { reason: 'again' })).rejects.toMatchObject({
      code: 'CONFLICT',
    });
    const requeued = await unblockWorkItem(queue, ledger, id, { note: 'legal approved' });
    expect(requeued.state).toBe('queued');
    await expect(unblockWorkItem(queue, ledger, id)).rejects.toMatchObject({ code: 'CONFLICT' });
    await expect(unblockWorkItem(queue, ledger, 'work_missing')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect((await ledger.read(id)).map((entry) => entry.content)).toEqual([
      'Blocked: waiting for legal',
      'Unblocked: legal approved',
    ]);
    await queue.close();
  });

  it('a block whose note was refused is finished by the same block tried again, with one note', async () => {
    const db = createFaultyDatabase(getDb());
    const queue = createWorkQueue({ db });
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    const input = { reason: 'waiting for legal', needs: 'a signature' };
    await expect(blockWorkItem(queue, fillingLedger(db, 'fillBefore'), id, input)).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      retryable: true,
    });
    db.heal();
    const ledger = createLedger({ db });
    expect((await queue.get(id))?.state).toBe('blocked');
    expect(await ledger.read(id)).toEqual([]);

    const blocked = await blockWorkItem(queue, ledger, id, input);
    expect(blocked).toMatchObject({
      state: 'blocked',
      stateReason: 'waiting for legal (needs: a signature)',
    });
    // Said once more, it is the same block: answered, and not noted again.
    await blockWorkItem(queue, ledger, id, input);
    expect((await ledger.read(id)).map((entry) => entry.content)).toEqual([
      'Blocked: waiting for legal (needs: a signature)',
    ]);
    await expect(blockWorkItem(queue, ledger, id, { reason: 'something else' })).rejects.toMatchObject({
      code: 'CONFLICT',
    });
    await queue.close();
  });

  it('an unblock refused after its note is finished by the same unblock tried again, with one note', async () => {
    const db = createFaultyDatabase(getDb());
    const queue = createWorkQueue({ db });
    const ledger = createLedger({ db });
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    await blockWorkItem(queue, ledger, id, { reason: 'waiting for legal' });
    await expect(
      unblockWorkItem(queue, fillingLedger(db, 'fillAfter'), id, { note: 'legal approved' }),
    ).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', retryable: true });
    db.heal();
    expect((await queue.get(id))?.state).toBe('blocked');

    expect((await unblockWorkItem(queue, ledger, id, { note: 'legal approved' })).state).toBe('queued');
    expect((await ledger.read(id)).map((entry) => entry.content)).toEqual([
      'Blocked: waiting for legal',
      'Unblocked: legal approved',
    ]);
    await queue.close();
  });
});
