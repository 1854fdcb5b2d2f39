import { beforeEach, expect, it, vi } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { createEventRecorder, createEventStore, type EventStore } from '../../src/store/index.js';
import { createManualClock } from '../../src/util/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';

describeEachDatabase('EventStore', (getDb) => {
  let events: EventStore;
  beforeEach(() => {
    events = createEventStore(getDb());
  });

  it('appends with increasing ids and lists in order with filters', async () => {
    const first = await events.append({
      type: 'run:started',
      at: 10,
      sessionKey: 'agent:main:main',
      agentId: 'main',
      runId: 'run_1',
      data: { runId: 'run_1', model: 'local/default', nested: { list: [1, 'two', null] } },
    });
    const second = await events.append({
      type: 'system:error',
      at: 11,
      data: { code: 'X', message: 'm', component: 'c' },
    });
    const third = await events.append({
      type: 'run:finished',
      at: 12,
      runId: 'run_1',
      workItemId: 'wi_1',
      data: {},
    });
    expect(second).toBeGreaterThan(first);
    expect(third).toBeGreaterThan(second);

    const all = await events.list();
    expect(all.map((event) => event.id)).toEqual([first, second, third]);
    expect(all[0]).toEqual({
      id: first,
      type: 'run:started',
      at: 10,
      sessionKey: 'agent:main:main',
      agentId: 'main',
      runId: 'run_1',
      data: { runId: 'run_1', model: 'local/default', nested: { list: [1, 'two', null] } },
    });
    expect(all[1]).toEqual({
      id: second,
      type: 'system:error',
      at: 11,
      data: { code: 'X', message: 'm', component: 'c' },
    });

    expect((await events.list({ runId: 'run_1' })).map((event) => event.id)).toEqual([first, third]);
    expect((await events.list({ types: ['system:error', 'run:finished'] })).map((event) => event.id)).toEqual(
      [second, third],
    );
    expect((await events.list({ sessionKey: 'agent:main:main' })).map((event) => event.id)).toEqual([first]);
    expect((await events.list({ agentId: 'main' })).map((event) => event.id)).toEqual([first]);
    expect((await events.list({ workItemId: 'wi_1' })).map((event) => event.id)).toEqual([third]);
    expect((await events.list({ afterId: first, limit: 1 })).map((event) => event.id)).toEqual([second]);
    expect((await events.list({ order: 'desc', limit: 2 })).map((event) => event.id)).toEqual([
      third,
      second,
    ]);
    expect((await events.list({ order: 'desc', beforeId: second })).map((event) => event.id)).toEqual([
      first,
    ]);
  });

  it('makes the index of a session, work item or run lookup with the first list that filters on it', async () => {
    const db = getDb();
    const indexes = async () =>
      (db.dialect === 'sqlite'
        ? await db.all<{ name: string }>(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events'",
          )
        : await db.all<{ name: string }>(
            "SELECT indexname AS name FROM pg_indexes WHERE tablename = 'events' AND schemaname = current_schema()",
          )
      )
        .map((row) => row.name)
        .filter((name) => name.startsWith('events_by_'))
        .sort();
    const rows = Array.from({ length: 40 }, (_, index) => ({
      type: index % 2 ? 'run:finished' : 'run:started',
      at: index,
      sessionKey: `agent:main:s${index % 4}`,
      agentId: 'main',
      workItemId: `wi_${index % 5}`,
      runId: `run_${Math.floor(index / 2)}`,
      data: { index },
    }));
    await events.appendMany(rows);
    // Writing rows and listing without those filters make none of them.
    await events.list({ types: ['run:started'], agentId: 'main' });
    expect(await indexes()).toEqual(['events_by_agent', 'events_by_type']);

    const ofRun = await events.list({ runId: 'run_7' });
    expect(ofRun.map((event) => event.data)).toEqual([{ index: 14 }, { index: 15 }]);
    expect(await indexes()).toEqual(['events_by_agent', 'events_by_run', 'events_by_type']);
    if (db.dialect === 'sqlite') {
      const plan = await db.all<{ detail: string }>(
        'EXPLAIN QUERY PLAN SELECT id FROM events WHERE run_id = ? ORDER BY id LIMIT 10',
        ['run_7'],
      );
      expect(plan.map((step) => step.detail).join(' ')).toContain('events_by_run');
    }
    expect((await events.list({ sessionKey: 'agent:main:s1', workItemId: 'wi_1', limit: 3 })).length).toBe(2);
    expect(await indexes()).toEqual([
      'events_by_agent',
      'events_by_run',
      'events_by_session',
      'events_by_type',
      'events_by_work_item',
    ]);
    // Another store on the same database (another process) finds them made and lists the same.
    expect(await createEventStore(db).list({ runId: 'run_7' })).toEqual(ofRun);
  });

  it('appends a large batch in one go and keeps its order', async () => {
    const batch = Array.from({ length: 1_203 }, (_, index) => ({
      type: 'test:item',
      at: index,
      data: { index },
    }));
    const ids = await events.appendMany(batch);
    expect(ids).toHaveLength(1_203);
    expect([...ids].sort((left, right) => left - right)).toEqual(ids);
    const listed = await events.list({ types: ['test:item'], limit: 10_000 });
    expect(listed.map((event) => (event.data as { index: number }).index)).toEqual(
      batch.map((_, index) => index),
    );
    expect(listed.map((event) => event.id)).toEqual(ids);
    expect(await events.appendMany([])).toEqual([]);
  });

  it('writes all of a batch or none of it, one statement or several', async () => {
    const good = (count: number) =>
      Array.from({ length: count }, (_, index) => ({ type: 'test:item', at: index, data: { index } }));
    // A row the schema refuses (type is NOT NULL) fails the whole batch.
    const bad = { type: null as unknown as string, at: 0, data: {} };
    await expect(events.appendMany([...good(3), bad])).rejects.toThrow();
    await expect(events.appendMany([...good(1_000), bad])).rejects.toThrow();
    expect(await events.list({ limit: 10_000 })).toEqual([]);
    expect(await events.appendMany(good(2))).toHaveLength(2);
    expect(await events.list()).toHaveLength(2);
  });

  it("records bus events in publish order, skipping streaming deltas and a decision loop's decisions", async () => {
    const bus = createBus({ clock: createManualClock(500) });
    const recorder = createEventRecorder({ bus, events });
    bus.publish(
      'run:started',
      { runId: 'r', agentId: 'main', model: 'local' },
      { runId: 'r', agentId: 'main' },
    );
    bus.publish('run:text-delta', { runId: 'r', delta: 'hi', text: 'hi' }, { runId: 'r' });
    bus.publish('agent:decided', { agentId: 'main', action: 'wait' }, { agentId: 'main' });
    bus.publish('store:degraded', { reason: 'disk' });
    await recorder.flush();
    bus.publish(
      'system:error',
      { code: 'E', message: 'm', component: 'x' },
      { sessionKey: 'agent:main:main' },
    );
    await recorder.stop();
    bus.publish('system:error', { code: 'AFTER', message: 'm', component: 'x' });
    await recorder.flush();
    const listed = await events.list();
    expect(listed.map((event) => event.type)).toEqual(['run:started', 'store:degraded', 'system:error']);
    expect(listed[0]).toMatchObject({ at: 500, runId: 'r', agentId: 'main', data: { model: 'local' } });
    expect(listed[2]).toMatchObject({ sessionKey: 'agent:main:main', data: { code: 'E' } });
  });

  it('gathers the events of batchDelayMs into one write', async () => {
    vi.useFakeTimers();
    try {
      const bus = createBus();
      const batches: number[] = [];
      const counted: EventStore = Object.create(events);
      counted.appendMany = (inputs) => {
        batches.push(inputs.length);
        return events.appendMany(inputs);
      };
      const recorder = createEventRecorder({ bus, events: counted, batchDelayMs: 20 });
      bus.publish('store:degraded', { reason: 'one' });
      await vi.advanceTimersByTimeAsync(5);
      bus.publish('store:degraded', { reason: 'two' });
      await vi.advanceTimersByTimeAsync(5);
      bus.publish('store:degraded', { reason: 'three' });
      expect(batches).toEqual([]);
      await vi.advanceTimersByTimeAsync(20);
      expect(batches).toEqual([3]);
      bus.publish('store:degraded', { reason: 'four' });
      await recorder.stop();
      expect(batches).toEqual([3, 1]);
      expect((await events.list()).map((event) => (event.data as { reason: string }).reason)).toEqual([
        'one',
        'two',
        'three',
        'four',
      ]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps the events a full disk refused and writes them, in order, once it is back', async () => {
    const faulty = createFaultyDatabase(getDb());
    const bus = createBus();
    const recorder = createEventRecorder({
      bus,
      events: createEventStore(faulty),
      writeRetryMs: 5,
      maxWriteRetryMs: 20,
    });
    bus.publish('store:degraded', { reason: 'before' });
    await recorder.flush();
    faulty.failWrites();
    bus.publish('store:degraded', { reason: 'while full 1' });
    await recorder.flush();
    bus.publish('store:degraded', { reason: 'while full 2' });
    await recorder.flush();
    expect(faulty.refused).toBeGreaterThan(0);
    const reasons = async () =>
      (await events.list()).map((event) => (event.data as { reason: string }).reason);
    expect(await reasons()).toEqual(['before']);

    faulty.heal();
    // Nothing else is published: the retry timer writes them.
    await vi.waitFor(async () => expect(await reasons()).toHaveLength(3), { timeout: 5_000 });
    bus.publish('store:degraded', { reason: 'after' });
    await recorder.stop();
    expect(await reasons()).toEqual(['before', 'while full 1', 'while full 2', 'after']);
  });

  it('writes at stop what a full disk refused, once it is back', async () => {
    const faulty = createFaultyDatabase(getDb());
    const bus = createBus();
    const recorder = createEventRecorder({ bus, events: createEventStore(faulty), writeRetryMs: 600_000 });
    faulty.failWrites();
    bus.publish('store:degraded', { reason: 'refused' });
    await recorder.flush();
    faulty.heal();
    await recorder.stop();
    expect((await events.list()).map((event) => (event.data as { reason: string }).reason)).toEqual([
      'refused',
    ]);
  });
});
