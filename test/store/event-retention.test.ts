import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { loadConfig } from '../../src/config/index.js';
import {
  auditConfigSchema,
  createEventRecorder,
  createEventRetention,
  createEventStore,
  type EventInput,
  type EventStore,
} from '../../src/store/index.js';
import { createManualClock, ErrorCodes } from '../../src/util/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';
import { capturingLogger, dayMs, deletes, eventually, planOf, recording } from '../helpers/retention.js';

const now = 100 * dayMs;

function event(at: number, label: string): EventInput {
  return { type: 'test:event', at, data: { label } };
}

const labels = async (events: EventStore) =>
  (await events.list({ limit: 10_000 })).map((stored) => (stored.data as { label: string }).label);

describeEachDatabase('event retention', (getDb) => {
  let events: EventStore;
  beforeEach(() => {
    events = createEventStore(getDb());
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('deletes the events older than the retention and keeps the rest', async () => {
    await events.appendMany([
      event(now - 40 * dayMs, 'forty days'),
      event(now - 31 * dayMs, 'thirty-one days'),
      event(now - 30 * dayMs - 1, 'just past'),
      event(now - 30 * dayMs, 'exactly thirty days'),
      event(now - dayMs, 'yesterday'),
      event(now, 'now'),
    ]);
    const retention = createEventRetention({ events, retainMs: 30 * dayMs, clock: createManualClock(now) });
    expect(await retention.prune()).toBe(3);
    expect(await labels(events)).toEqual(['exactly thirty days', 'yesterday', 'now']);
    expect(await retention.prune()).toBe(0);
  });

  it('deletes in batches of batchRows ids, each its own statement, and keeps newer rows among them', async () => {
    const { db, statements } = recording(getDb());
    const old = (index: number) => event(now - 2 * dayMs + index, `old ${index}`);
    await events.appendMany([
      ...[0, 1, 2, 3].map(old),
      // Written out of time order (its clock was ahead): newer than the cutoff amid older rows.
      event(now, 'newer amid old'),
      ...[4, 5, 6, 7, 8, 9].map(old),
      event(now - 1_000, 'recent 1'),
      event(now - 500, 'recent 2'),
    ]);
    const retention = createEventRetention({
      events: createEventStore(db),
      retainMs: dayMs,
      batchRows: 3,
      clock: createManualClock(now),
    });
    expect(await retention.prune()).toBe(10);
    expect(await labels(events)).toEqual(['newer amid old', 'recent 1', 'recent 2']);
    const batches = deletes(statements);
    expect(batches).toHaveLength(4);
    for (const batch of batches) {
      const [from, to] = batch.params as [number, number];
      expect(to - from).toBe(3);
    }
    // The step after the last batch looked at the oldest remaining row and stopped there.
    expect(statements.at(-1)!.sql).toMatch(/^SELECT id, at FROM events WHERE id >= \? ORDER BY id LIMIT 1$/);
  });

  it('with nothing to delete reads one row by the primary key and deletes nothing', async () => {
    const { db, statements } = recording(getDb());
    const store = createEventStore(db);
    const retention = createEventRetention({ events: store, retainMs: dayMs, clock: createManualClock(now) });
    expect(await retention.prune()).toBe(0);
    expect(statements).toHaveLength(1);

    await events.appendMany(Array.from({ length: 50 }, (_, index) => event(now - index, `recent ${index}`)));
    statements.length = 0;
    expect(await retention.prune()).toBe(0);
    expect(statements).toHaveLength(1);
    expect(deletes(statements)).toEqual([]);
    expect(await events.list({ limit: 10_000 })).toHaveLength(50);

    // Both statements of a step go by the primary key, never over the whole table.
    expect(await store.deleteOlderThan(now + 1, { fromId: 0, maxRows: 1_000 })).toEqual({
      deleted: 50,
      nextFromId: expect.any(Number),
    });
    const [lookup, batch] = statements.slice(-2);
    expect(batch!.sql).toMatch(/^DELETE/);
    for (const statement of [lookup!, batch!]) {
      const plan = await planOf(getDb(), statement);
      if (getDb().dialect === 'sqlite') {
        expect(plan).toMatch(/USING INTEGER PRIMARY KEY/);
        expect(plan).not.toMatch(/SCAN events/);
      } else {
        expect(plan).toMatch(/Index (Only )?Scan (using|on) events_pkey/);
        expect(plan).not.toMatch(/Seq Scan/);
      }
    }
  });

  it('keeps every event with a retention of 0', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    await events.appendMany([event(0, 'the epoch'), event(now, 'now')]);
    const { db, statements } = recording(getDb());
    const retention = createEventRetention({
      events: createEventStore(db),
      retainMs: 0,
      clock: createManualClock(now),
    });
    retention.start();
    await vi.advanceTimersByTimeAsync(10 * 60 * 60 * 1000);
    expect(await retention.prune()).toBe(0);
    expect(statements).toEqual([]);
    expect(await labels(events)).toEqual(['the epoch', 'now']);
    await retention.stop();
  });

  it('prunes at start and then every intervalMs, until stopped', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const clock = createManualClock(now);
    let prunes = 0;
    const counted: EventStore = Object.create(events);
    counted.deleteOlderThan = (before, range) => {
      if (range.fromId === 0) prunes++;
      return events.deleteOlderThan(before, range);
    };
    // A prune's log line comes right before the timer of the next is set.
    const logger = capturingLogger();
    const pruned = () => logger.lines.filter((line) => line.message === 'pruned the audit log').length;
    await events.appendMany([event(now - 2 * dayMs, 'old at start'), event(now, 'new at start')]);
    const retention = createEventRetention({
      events: counted,
      retainMs: dayMs,
      intervalMs: 60_000,
      clock,
      logger,
    });
    retention.start();
    retention.start();
    await eventually(() => expect(pruned()).toBe(1));
    expect(await labels(events)).toEqual(['new at start']);
    expect(prunes).toBe(1);

    clock.advance(2 * dayMs);
    await vi.advanceTimersByTimeAsync(59_999);
    expect(prunes).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    await eventually(() => expect(pruned()).toBe(2));
    expect(await labels(events)).toEqual([]);
    expect(prunes).toBe(2);

    await events.append(event(0, 'after stop'));
    await retention.stop();
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    expect(prunes).toBe(2);
    expect(await labels(events)).toEqual(['after stop']);
  });

  it('logs a prune a full disk refused, keeps recording, and prunes at the next interval', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const faulty = createFaultyDatabase(getDb());
    const store = createEventStore(faulty);
    await store.appendMany([event(now - 2 * dayMs, 'old'), event(now, 'new')]);
    const logger = capturingLogger();
    const bus = createBus({ clock: createManualClock(now) });
    const recorder = createEventRecorder({ bus, events: store, writeRetryMs: 600_000 });
    const retention = createEventRetention({
      events: store,
      retainMs: dayMs,
      intervalMs: 60_000,
      clock: createManualClock(now),
      logger,
    });

    faulty.failWrites();
    retention.start();
    await eventually(() => expect(logger.lines.map((line) => line.level)).toEqual(['warn']));
    expect(logger.lines[0]!.object.err).toMatchObject({ code: ErrorCodes.storeUnavailable });
    expect(await labels(events)).toEqual(['old', 'new']);
    bus.publish('store:degraded', { reason: 'while the disk is full' });
    await recorder.flush();

    faulty.heal();
    bus.publish('store:degraded', { reason: 'once it is back' });
    await recorder.flush();
    await vi.advanceTimersByTimeAsync(60_000);
    await eventually(() => expect(logger.lines.map((line) => line.level)).toEqual(['warn', 'info']));
    expect(logger.lines[1]!.object).toMatchObject({ deleted: 1 });
    expect((await events.list()).map((stored) => stored.type)).toEqual([
      'test:event',
      'store:degraded',
      'store:degraded',
    ]);

    await retention.stop();
    await recorder.stop();
  });
});

describe('the audit section of agentd.yaml', () => {
  it('keeps 30 days by default, 0 for ever, and refuses negative or unknown settings', () => {
    expect(auditConfigSchema.parse({})).toEqual({ retainDays: 30 });
    expect(auditConfigSchema.parse({ retainDays: 0 })).toEqual({ retainDays: 0 });
    expect(auditConfigSchema.parse({ retainDays: 0.5 })).toEqual({ retainDays: 0.5 });
    expect(auditConfigSchema.safeParse({ retainDays: -1 }).success).toBe(false);
    expect(auditConfigSchema.safeParse({ retentionDays: 7 }).success).toBe(false);
  });

  it('is read from agentd.yaml into the config sections', () => {
    const home = mkdtempSync(join(tmpdir(), 'agentd-audit-config-'));
    try {
      writeFileSync(join(home, 'agentd.yaml'), 'audit:\n  retainDays: 7\n');
      const config = loadConfig({ cwd: home, env: { AGENTD_HOME: home } });
      expect(auditConfigSchema.parse(config.sections.audit)).toEqual({ retainDays: 7 });
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
