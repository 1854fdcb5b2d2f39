import { describe, expect, it } from 'vitest';
import type { BusEvent } from '../../src/bus/index.js';
import { createBus } from '../../src/bus/index.js';
import type { SqlDatabase, SqlValue } from '../../src/store/index.js';
import { createManualClock, createSequentialIdGenerator } from '../../src/util/index.js';
import { canTransition, createWorkQueue, workStates } from '../../src/work/index.js';
import { deferred } from '../agents/helpers.js';
import { describeEachDatabase } from '../helpers/databases.js';

describe('work state transitions', () => {
  it('allows the documented life cycle and refuses leaving a terminal state', () => {
    expect(canTransition('queued', 'claimed')).toBe(true);
    expect(canTransition('claimed', 'running')).toBe(true);
    expect(canTransition('running', 'completed')).toBe(true);
    expect(canTransition('failed', 'queued')).toBe(true);
    expect(canTransition('failed', 'dead')).toBe(true);
    expect(canTransition('queued', 'completed')).toBe(false);
    expect(canTransition('queued', 'running')).toBe(false);
    for (const to of workStates) {
      expect(canTransition('completed', to)).toBe(false);
      expect(canTransition('merged', to)).toBe(false);
      expect(canTransition('dead', to)).toBe(false);
      expect(canTransition('cancelled', to)).toBe(false);
    }
  });
});

describeEachDatabase('work queue', (getDb) => {
  const setup = (config: Record<string, number> = {}) => {
    const clock = createManualClock();
    const bus = createBus({ clock });
    const events: BusEvent[] = [];
    bus.subscribe({ types: ['work:*'] }, (event) => events.push(event));
    const queue = createWorkQueue({
      db: getDb(),
      bus,
      clock,
      idGenerator: createSequentialIdGenerator(),
      config,
    });
    return { clock, bus, events, queue };
  };

  it('runs an item through queued → claimed → running → completed with events in order', async () => {
    const { queue, events } = setup();
    const { id } = await queue.submit({ kind: 'task', description: 'write the report', params: { n: 1 } });
    const claimed = await queue.claim('w1');
    expect(claimed?.id).toBe(id);
    expect(claimed?.state).toBe('claimed');
    expect(claimed?.attempts).toBe(1);
    await queue.start(id, 'w1');
    const done = await queue.complete(id, 'w1', { data: { summary: 'report written' } });
    expect(done.state).toBe('completed');
    expect(done.outcome?.data).toEqual({ summary: 'report written' });
    expect(done.leaseOwner).toBeNull();
    expect(events.map((event) => event.type)).toEqual([
      'work:submitted',
      'work:claimed',
      'work:started',
      'work:completed',
    ]);
    expect((events[3]!.data as { summary?: string }).summary).toBe('report written');
  });

  it('claims and starts in one step when asked, publishing both transitions', async () => {
    const { queue, events, clock } = setup();
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    const item = await queue.claim('w1', { start: true });
    expect(item).toMatchObject({
      id,
      state: 'running',
      startedAt: clock.now(),
      leaseOwner: 'w1',
      attempts: 1,
    });
    expect(events.map((event) => event.type)).toEqual(['work:submitted', 'work:claimed', 'work:started']);
    await queue.complete(id, 'w1');
  });

  it('refuses illegal transitions with INVALID_TRANSITION and leaves the item unchanged', async () => {
    const { queue } = setup();
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    await expect(queue.resume(id)).rejects.toMatchObject({ code: 'INVALID_TRANSITION' });
    await queue.cancel(id);
    await expect(queue.pause(id)).rejects.toMatchObject({ code: 'INVALID_TRANSITION' });
    expect((await queue.get(id))?.state).toBe('cancelled');
    await expect(queue.pause('nope')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('claims by priority, then age, and respects kind filters', async () => {
    const { queue, clock } = setup();
    const low = await queue.submit({ kind: 'task', description: 'low', priority: 0 });
    clock.advance(1);
    const high = await queue.submit({ kind: 'task', description: 'high', priority: 5 });
    clock.advance(1);
    const memory = await queue.submit({ kind: 'memory.maintain', description: 'm', priority: 10 });
    expect((await queue.claim('w', { excludeKinds: ['memory.maintain'] }))?.id).toBe(high.id);
    expect((await queue.claim('w', { kinds: ['task'] }))?.id).toBe(low.id);
    expect(await queue.claim('w', { kinds: ['task'] })).toBeUndefined();
    expect((await queue.claim('w'))?.id).toBe(memory.id);
  });

  it('merges a submission whose dedup key matches a live item and returns the live id', async () => {
    const { queue, events } = setup();
    const first = await queue.submit({ kind: 'task', description: 'a', dedupKey: 'k1' });
    const second = await queue.submit({ kind: 'task', description: 'a again', dedupKey: 'k1' });
    expect(second).toMatchObject({ id: first.id, merged: true });
    const record = await queue.get(second.mergedRecordId!);
    expect(record).toMatchObject({ state: 'merged', mergedInto: first.id, dedupKey: null });
    expect(events.filter((event) => event.type === 'work:merged')).toHaveLength(1);
    // Same key, another kind: not a duplicate.
    const other = await queue.submit({ kind: 'other', description: 'a', dedupKey: 'k1' });
    expect(other.merged).toBe(false);
    // Once the live item ended, the key is free again.
    await queue.claim('w', { kinds: ['task'] });
    await queue.start(first.id, 'w');
    await queue.complete(first.id, 'w');
    const third = await queue.submit({ kind: 'task', description: 'a', dedupKey: 'k1' });
    expect(third.merged).toBe(false);
    expect(third.id).not.toBe(first.id);
  });

  it("claims only the listed agents' items, combined with kind filters", async () => {
    const { queue } = setup();
    const mine = await queue.submit({ kind: 'task', description: 'a', agentId: 'helper' });
    await queue.submit({ kind: 'task', description: 'b', agentId: 'main' });
    const note = await queue.submit({ kind: 'note', description: 'c', agentId: 'helper' });
    expect(await queue.claimBatch('w', 5, { agentIds: ['helper'], kinds: ['task'] })).toMatchObject([
      { id: mine.id },
    ]);
    expect(await queue.claimBatch('w', 5, { agentIds: ['helper'] })).toMatchObject([{ id: note.id }]);
    expect(await queue.claimBatch('w', 5, { agentIds: ['nobody'] })).toEqual([]);
    // Lists travel to Postgres as one array literal: quotes, backslashes, braces and commas survive.
    const odd = 'odd "agent" \\ {x}, NULL';
    const oddItem = await queue.submit({ kind: 'task', description: 'd', agentId: odd });
    expect(await queue.claimBatch('w', 5, { agentIds: ['NULL', odd] })).toMatchObject([{ id: oddItem.id }]);
  });

  it('completeMany completes a batch in one call, each item under its own guard', async () => {
    const { queue, clock, events } = setup({ leaseMs: 1_000 });
    const ids: Record<string, string> = {};
    for (const name of ['expired', 'a', 'b', 'other']) {
      ids[name] = (await queue.submit({ kind: 'task', description: name })).id;
      clock.advance(1);
    }
    expect((await queue.claim('w1', { start: true }))?.id).toBe(ids.expired);
    clock.advance(600);
    expect((await queue.claimBatch('w1', 2, { start: true })).map((item) => item.id)).toEqual([ids.a, ids.b]);
    expect((await queue.claim('w2'))?.id).toBe(ids.other);
    clock.advance(500);
    const results = await queue.completeMany('w1', [
      { id: ids.a!, data: { summary: 'a done' }, durationMs: 42 },
      { id: ids.b! },
      { id: ids.other!, data: 'not mine' },
      { id: ids.expired!, data: 'too late' },
      { id: 'missing' },
      { id: ids.a!, data: 'twice' },
    ]);
    expect(results.map((result) => result.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'rejected',
      'rejected',
      'rejected',
      'rejected',
    ]);
    const [a, b, other, expired, missing, twice] = results;
    expect(a).toMatchObject({
      value: { id: ids.a, state: 'completed', leaseOwner: null, outcome: { data: { summary: 'a done' } } },
    });
    // Without durationMs the time since the item started counts.
    expect(b).toMatchObject({ value: { id: ids.b, outcome: { durationMs: 500 } } });
    expect(other).toMatchObject({
      reason: { code: 'LEASE_EXPIRED', message: expect.stringContaining('w2') },
    });
    expect(expired).toMatchObject({ reason: { code: 'LEASE_EXPIRED' } });
    expect(missing).toMatchObject({ reason: { code: 'NOT_FOUND' } });
    expect(twice).toMatchObject({ reason: { code: 'INVALID_TRANSITION' } });
    // The stored outcome is what JSON.stringify makes of it, as when the queue built it in JavaScript.
    const raw = await getDb().all<{ id: string; outcome: string }>(
      'SELECT id, outcome FROM work_items WHERE id IN (?, ?) ORDER BY id',
      [ids.a!, ids.b!],
    );
    expect(Object.fromEntries(raw.map((row) => [row.id, row.outcome]))).toEqual({
      [ids.a!]: JSON.stringify({ data: { summary: 'a done' }, durationMs: 42 }),
      [ids.b!]: JSON.stringify({ durationMs: 500 }),
    });
    expect(
      events.filter((event) => event.type === 'work:completed').map((event) => event.data),
    ).toMatchObject([
      { workItemId: ids.a, durationMs: 42, summary: 'a done' },
      { workItemId: ids.b, durationMs: 500 },
    ]);
    expect((await queue.getMany([ids.other!, ids.expired!])).map((item) => item.state)).toEqual([
      'claimed',
      'running',
    ]);
    expect(await queue.completeMany('w1', [])).toEqual([]);
  });

  it('completeMany refuses an entry whose data cannot be serialised without failing the others', async () => {
    const { queue } = setup();
    const first = await queue.submit({ kind: 'task', description: 'x' });
    const second = await queue.submit({ kind: 'task', description: 'y' });
    await queue.claimBatch('w', 2, { start: true });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const [bad, good] = await queue.completeMany('w', [
      { id: first.id, data: cyclic },
      { id: second.id, data: 'fine' },
    ]);
    expect(bad).toMatchObject({ status: 'rejected', reason: expect.any(TypeError) });
    expect(good).toMatchObject({ status: 'fulfilled', value: { state: 'completed' } });
    expect((await queue.get(first.id))?.state).toBe('running');
    await expect(queue.complete(first.id, 'w', { data: 10n })).rejects.toBeInstanceOf(TypeError);
  });

  it('completeMany stores data that needs escaping exactly', async () => {
    const { queue } = setup();
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    await queue.claim('w', { start: true });
    const data = { text: 'quote " backslash \\ brace } comma , nul \u0000 ünï', list: [1.5, null, true] };
    const [result] = await queue.completeMany('w', [{ id, data, durationMs: 1.25 }]);
    expect(result).toMatchObject({ status: 'fulfilled', value: { outcome: { data, durationMs: 1.25 } } });
    expect((await queue.get(id))?.outcome).toEqual({ data, durationMs: 1.25 });
  });

  it('expires leases: a dead worker loses its item, and its late completion is rejected', async () => {
    const { queue, clock } = setup({ leaseMs: 1_000 });
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    await queue.claim('dead-worker');
    await queue.start(id, 'dead-worker');
    clock.advance(500);
    await queue.heartbeat(id, 'dead-worker');
    clock.advance(999);
    expect((await queue.reapExpiredLeases()).requeued).toEqual([]);
    clock.advance(2);
    expect((await queue.reapExpiredLeases()).requeued).toEqual([id]);
    await expect(queue.complete(id, 'dead-worker', { data: 1 })).rejects.toMatchObject({
      code: 'LEASE_EXPIRED',
    });
    const again = await queue.claim('w2');
    expect(again).toMatchObject({ id, attempts: 2, leaseOwner: 'w2' });
    await queue.start(id, 'w2');
    await expect(queue.complete(id, 'dead-worker')).rejects.toMatchObject({ code: 'LEASE_EXPIRED' });
    await expect(queue.heartbeat(id, 'dead-worker')).rejects.toMatchObject({ code: 'LEASE_EXPIRED' });
    expect((await queue.complete(id, 'w2', { data: 2 })).outcome?.data).toBe(2);
  });

  it('rejects completion after the lease lapsed even before anyone reaped it', async () => {
    const { queue, clock } = setup({ leaseMs: 1_000 });
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    await queue.claim('w');
    clock.advance(1_001);
    await expect(queue.start(id, 'w')).rejects.toMatchObject({ code: 'LEASE_EXPIRED' });
    await expect(queue.complete(id, 'w')).rejects.toMatchObject({ code: 'LEASE_EXPIRED' });
  });

  it('claim reaps lapsed leases when nothing else is ready', async () => {
    const { queue, clock } = setup({ leaseMs: 1_000 });
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    await queue.claim('w1');
    clock.advance(5_000);
    expect((await queue.claim('w2'))?.id).toBe(id);
  });

  it('kills an item whose lease lapsed on its last attempt', async () => {
    const { queue, clock, events } = setup({ leaseMs: 1_000, maxAttempts: 1 });
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    await queue.claim('w1');
    clock.advance(1_001);
    expect((await queue.reapExpiredLeases()).dead).toEqual([id]);
    expect((await queue.get(id))?.state).toBe('dead');
    expect(events.some((event) => event.type === 'work:dead')).toBe(true);
  });

  it('retries a retryable failure with exponential backoff, then gives up as dead', async () => {
    const { queue, clock } = setup({ backoffBaseMs: 1_000, maxAttempts: 3 });
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    const error = { code: 'PROVIDER_TIMEOUT', message: 'slow', retryable: true };
    await queue.claim('w');
    const first = await queue.fail(id, 'w', error);
    expect(first.state).toBe('queued');
    expect(first.runAfter).toBe(clock.now() + 1_000);
    expect(await queue.claim('w')).toBeUndefined();
    clock.advance(1_000);
    expect((await queue.claim('w'))?.id).toBe(id);
    const second = await queue.fail(id, 'w', error);
    expect(second.runAfter).toBe(clock.now() + 2_000);
    clock.advance(2_000);
    await queue.claim('w');
    const third = await queue.fail(id, 'w', error);
    expect(third.state).toBe('dead');
    expect(third.outcome?.error?.code).toBe('PROVIDER_TIMEOUT');
  });

  it('a non-retryable failure ends the item as failed', async () => {
    const { queue } = setup();
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    await queue.claim('w');
    const failed = await queue.fail(id, 'w', { code: 'INVALID_REQUEST', message: 'bad', retryable: false });
    expect(failed.state).toBe('failed');
    expect(failed.attempts).toBe(1);
  });

  it('pauses, resumes, blocks and unblocks', async () => {
    const { queue } = setup();
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    await queue.pause(id);
    expect(await queue.claim('w')).toBeUndefined();
    await queue.resume(id);
    await queue.block(id, { reason: 'needs a key' });
    expect((await queue.get(id))?.stateReason).toBe('needs a key');
    expect(await queue.claim('w')).toBeUndefined();
    await queue.unblock(id);
    expect((await queue.claim('w'))?.id).toBe(id);
    // A running item can be paused: its worker's completion is then refused.
    await queue.start(id, 'w');
    await queue.pause(id);
    await expect(queue.complete(id, 'w')).rejects.toMatchObject({ code: 'INVALID_TRANSITION' });
  });

  it('release hands an item back without spending an attempt', async () => {
    const { queue } = setup();
    const { id } = await queue.submit({ kind: 'task', description: 'x' });
    await queue.claim('w');
    const released = await queue.release(id, 'w');
    expect(released).toMatchObject({ state: 'queued', attempts: 0 });
    expect((await queue.claim('w'))?.attempts).toBe(1);
  });

  it('enforces the depth limit and the fan-out limit, and inherits priority and session', async () => {
    const { queue } = setup({ maxDepth: 2, maxChildren: 2 });
    const root = await queue.submit({ kind: 'task', description: 'root', priority: 7, sessionKey: 's1' });
    const child = await queue.submit({ kind: 'task', description: 'child', parentId: root.id });
    expect(await queue.get(child.id)).toMatchObject({
      depth: 1,
      priority: 7,
      sessionKey: 's1',
      parentId: root.id,
    });
    const grandchild = await queue.submit({ kind: 'task', description: 'gc', parentId: child.id });
    await expect(
      queue.submit({ kind: 'task', description: 'too deep', parentId: grandchild.id }),
    ).rejects.toMatchObject({
      code: 'DEPTH_LIMIT',
    });
    await queue.submit({ kind: 'task', description: 'second child', parentId: root.id, priority: 1 });
    await expect(
      queue.submit({ kind: 'task', description: 'third', parentId: root.id }),
    ).rejects.toMatchObject({
      code: 'FAN_OUT_LIMIT',
    });
    await expect(
      queue.submit({ kind: 'task', description: 'orphan', parentId: 'missing' }),
    ).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
  });

  it('cancelling a parent cancels its live descendants', async () => {
    const { queue } = setup();
    const root = await queue.submit({ kind: 'task', description: 'root' });
    const child = await queue.submit({ kind: 'task', description: 'child', parentId: root.id });
    const grandchild = await queue.submit({ kind: 'task', description: 'gc', parentId: child.id });
    await queue.cancel(root.id, { reason: 'user said stop' });
    const states = (await queue.getMany([root.id, child.id, grandchild.id])).map((item) => item.state);
    expect(states).toEqual(['cancelled', 'cancelled', 'cancelled']);
  });

  it('a parent whose lease lapsed while awaiting children is blocked, then re-queued when they end', async () => {
    const { queue, clock } = setup({ leaseMs: 1_000 });
    const parent = await queue.submit({ kind: 'task', description: 'parent' });
    await queue.claim('w');
    await queue.start(parent.id, 'w');
    const child = await queue.submit({ kind: 'child', description: 'child', parentId: parent.id });
    await queue.setWaitingOn(parent.id, 'w', [child.id]);
    clock.advance(1_001);
    const reaped = await queue.reapExpiredLeases();
    expect(reaped.blocked).toEqual([parent.id]);
    expect((await queue.get(parent.id))?.state).toBe('blocked');
    await queue.claim('w2', { kinds: ['child'] });
    await queue.start(child.id, 'w2');
    await queue.complete(child.id, 'w2', { data: { summary: 'child done' } });
    const resumed = await queue.get(parent.id);
    expect(resumed?.state).toBe('queued');
    expect(resumed?.waitingOn).toEqual([child.id]);
    expect((await queue.claim('w3'))?.id).toBe(parent.id);
  });

  it('lists and counts with filters', async () => {
    const { queue } = setup();
    await queue.submit({ kind: 'task', description: 'a', sessionKey: 's1', agentId: 'main' });
    await queue.submit({ kind: 'task', description: 'b', sessionKey: 's2', agentId: 'main' });
    const { id } = await queue.submit({
      kind: 'task',
      description: 'c',
      sessionKey: 's1',
      agentId: 'helper',
    });
    await queue.pause(id);
    expect((await queue.list({ sessionKey: 's1' })).map((item) => item.description).sort()).toEqual([
      'a',
      'c',
    ]);
    expect((await queue.list({ agentId: 'main', states: ['queued'] })).length).toBe(2);
    const counts = await queue.counts({ sessionKey: 's1' });
    expect(counts.queued).toBe(1);
    expect(counts.paused).toBe(1);
  });

  it('rejects invalid submissions with a clear error', async () => {
    const { queue } = setup();
    await expect(queue.submit({ kind: 'bad kind!', description: 'x' })).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
  });

  it('waitForWork wakes on a submission without polling', async () => {
    const { queue } = setup({ pollIntervalMs: 60_000 });
    const sequence = queue.wakeSequence;
    const waiting = queue.waitForWork(undefined, { sinceSequence: sequence });
    await queue.submit({ kind: 'task', description: 'x' });
    await waiting;
    expect(queue.wakeSequence).toBeGreaterThan(sequence);
    // A stale sequence returns at once instead of sleeping through a wake-up that already happened.
    await queue.waitForWork(undefined, { sinceSequence: sequence });
  });

  it('waitForWork ends on a wake-up that arrives while it reads the next deadline', async () => {
    const db = getDb();
    const reading = deferred();
    const held = deferred<undefined>();
    // A database whose deadline read hangs until the test lets it go.
    const slow: SqlDatabase = Object.assign(Object.create(db) as SqlDatabase, {
      get: async <Row>(sql: string, params?: ReadonlyArray<SqlValue>) => {
        if (!sql.includes('MIN(run_after)')) return db.get<Row>(sql, params);
        reading.resolve();
        await held.promise;
        return db.get<Row>(sql, params);
      },
    });
    const queue = createWorkQueue({ db: slow, config: { pollIntervalMs: 60_000 } });
    const waiting = queue.waitForWork();
    await reading.promise;
    await queue.submit({ kind: 'task', description: 'x' });
    await waiting;
    held.resolve(undefined);
  });

  it('waitForWork returns when aborted', async () => {
    const { queue } = setup({ pollIntervalMs: 60_000 });
    const controller = new AbortController();
    const waiting = queue.waitForWork(controller.signal);
    controller.abort();
    await waiting;
  });
});
