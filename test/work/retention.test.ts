import { afterEach, describe, expect, it, vi } from 'vitest';
import type { SqlDatabase } from '../../src/store/index.js';
import { createManualClock, createSequentialIdGenerator, ErrorCodes } from '../../src/util/index.js';
import {
  createWorkQueue,
  createWorkRetention,
  memoryMaintenanceKind,
  type WorkConfig,
  type WorkQueue,
  workConfigSchema,
} from '../../src/work/index.js';
import { counted, describeEachDatabase } from '../helpers/databases.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';
import { capturingLogger, dayMs, eventually, now } from '../helpers/retention.js';

type Clock = ReturnType<typeof createManualClock>;

// One sequence for every queue, so two queues on one database never make the same id.
const idGenerator = createSequentialIdGenerator();

function queueOn(db: SqlDatabase, clock: Clock, config: Partial<WorkConfig> = {}): WorkQueue {
  return createWorkQueue({ db, clock, idGenerator, config });
}

/** An item of `kind` completed `ageMs` before `now`. */
async function endedAgo(queue: WorkQueue, clock: Clock, ageMs: number, kind = 'task'): Promise<string> {
  clock.set(now - ageMs);
  const { id } = await queue.submit({ kind, description: 'do it' });
  const claimed = await queue.claim('w1', { kinds: [kind], start: true });
  if (claimed?.id !== id) throw new Error(`expected to claim ${id}`);
  await queue.complete(id, 'w1');
  return id;
}

async function liveSince(queue: WorkQueue, clock: Clock, ageMs: number, kind = 'task'): Promise<string> {
  clock.set(now - ageMs);
  return (await queue.submit({ kind, description: 'still to do' })).id;
}

const remaining = async (queue: WorkQueue) =>
  (await queue.list({ limit: 10_000 })).map((item) => item.id).sort();

describeEachDatabase('work retention', (getDb) => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('keeps ended work 30 days and ended system work one day by default; live work always', async () => {
    const clock = createManualClock(now);
    const queue = queueOn(getDb(), clock);
    const gone = [
      await endedAgo(queue, clock, 31 * dayMs),
      await endedAgo(queue, clock, 2 * dayMs, memoryMaintenanceKind),
      await endedAgo(queue, clock, 31 * dayMs, memoryMaintenanceKind),
    ];
    const kept = [
      await endedAgo(queue, clock, 29 * dayMs),
      await endedAgo(queue, clock, 2 * dayMs),
      await endedAgo(queue, clock, dayMs / 2, memoryMaintenanceKind),
      await liveSince(queue, clock, 40 * dayMs),
      await liveSince(queue, clock, 3 * dayMs, memoryMaintenanceKind),
    ];
    clock.set(now);
    const retention = createWorkRetention({ queue, clock });
    expect(await retention.prune()).toBe(gone.length);
    expect(await remaining(queue)).toEqual([...kept].sort());
    expect(await retention.prune()).toBe(0);
    await retention.stop();
  });

  it('with retainEndedDays 0 keeps other work for ever and still prunes system work; with both 0 reads nothing', async () => {
    const clock = createManualClock(now);
    const forever = queueOn(getDb(), clock, { retainEndedDays: 0 });
    const task = await endedAgo(forever, clock, 400 * dayMs);
    await endedAgo(forever, clock, 2 * dayMs, memoryMaintenanceKind);
    clock.set(now);
    expect(await createWorkRetention({ queue: forever, clock }).prune()).toBe(1);
    expect(await remaining(forever)).toEqual([task]);

    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { db, statements } = counted(getDb());
    const keepsAll = createWorkRetention({
      queue: queueOn(db, clock, { retainEndedDays: 0, retainEndedSystemDays: 0 }),
      clock,
    });
    keepsAll.start();
    await vi.advanceTimersByTimeAsync(10 * 60 * 60 * 1000);
    expect(await keepsAll.prune()).toBe(0);
    expect(statements()).toBe(0);
    await keepsAll.stop();
  });

  it('never keeps system work longer than other work', async () => {
    const clock = createManualClock(now);
    const longer = queueOn(getDb(), clock, { retainEndedDays: 30, retainEndedSystemDays: 60 });
    await endedAgo(longer, clock, 40 * dayMs, memoryMaintenanceKind);
    const recent = await endedAgo(longer, clock, 20 * dayMs, memoryMaintenanceKind);
    clock.set(now);
    expect(await createWorkRetention({ queue: longer, clock }).prune()).toBe(1);
    expect(await remaining(longer)).toEqual([recent]);

    // 0 leaves system work to retainEndedDays.
    const asAnyWork = queueOn(getDb(), clock, { retainEndedSystemDays: 0 });
    await endedAgo(asAnyWork, clock, 31 * dayMs, memoryMaintenanceKind);
    const twoDays = await endedAgo(asAnyWork, clock, 2 * dayMs, memoryMaintenanceKind);
    clock.set(now);
    expect(await createWorkRetention({ queue: asAnyWork, clock }).prune()).toBe(1);
    expect(await remaining(asAnyWork)).toEqual([recent, twoDays].sort());
  });

  it('with nothing to prune sends one statement per lane: five states and each system kind', async () => {
    const clock = createManualClock(now);
    const queue = queueOn(getDb(), clock);
    for (let index = 0; index < 20; index++) await endedAgo(queue, clock, index, memoryMaintenanceKind);
    clock.set(now);
    const { db, statements } = counted(getDb());
    const retention = createWorkRetention({ queue: queueOn(db, clock), clock });
    expect(await retention.prune()).toBe(0);
    expect(statements()).toBe(6);
  });

  it('deletes batch by batch, and a stop ends the prune after its current batch', async () => {
    const clock = createManualClock(now);
    const queue = queueOn(getDb(), clock);
    for (let index = 0; index < 5; index++) await endedAgo(queue, clock, 40 * dayMs - index);
    clock.set(now);
    const batches: number[] = [];
    const countingQueue: WorkQueue = Object.create(queue);
    countingQueue.deleteEnded = async (step) => {
      const result = await queue.deleteEnded(step);
      if ('state' in step.lane && step.lane.state === 'completed') batches.push(result.deleted);
      return result;
    };
    const whole = createWorkRetention({ queue: countingQueue, clock, batchRows: 2 });
    expect(await whole.prune()).toBe(5);
    expect(batches).toEqual([2, 2, 1]);

    await endedAgo(queue, clock, 40 * dayMs - 10);
    await endedAgo(queue, clock, 40 * dayMs - 11);
    clock.set(now);
    batches.length = 0;
    const stopped = createWorkRetention({ queue: countingQueue, clock, batchRows: 1 });
    const pruning = stopped.prune();
    await stopped.stop();
    expect(await pruning).toBe(1);
    expect(batches).toEqual([1]);
    expect(await remaining(queue)).toHaveLength(1);
  });

  it('prunes at start and then every intervalMs, until stopped', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const clock = createManualClock(now);
    const queue = queueOn(getDb(), clock);
    let prunes = 0;
    const countingQueue: WorkQueue = Object.create(queue);
    countingQueue.deleteEnded = (step) => {
      // A prune's first batch of a lane starts from the oldest.
      const first = (step.after ?? Number.MIN_SAFE_INTEGER) === Number.MIN_SAFE_INTEGER;
      if ('state' in step.lane && step.lane.state === 'completed' && first) prunes++;
      return queue.deleteEnded(step);
    };
    const logger = capturingLogger();
    const pruned = () => logger.lines.filter((line) => line.message === 'pruned ended work items').length;
    await endedAgo(queue, clock, 2 * dayMs, memoryMaintenanceKind);
    const fresh = await endedAgo(queue, clock, 0, memoryMaintenanceKind);
    clock.set(now);
    const retention = createWorkRetention({ queue: countingQueue, intervalMs: 60_000, clock, logger });
    retention.start();
    retention.start();
    await eventually(() => expect(pruned()).toBe(1));
    expect(logger.lines[0]!.object).toEqual({ deleted: 1 });
    expect(await remaining(queue)).toEqual([fresh]);
    expect(prunes).toBe(1);

    clock.advance(2 * dayMs);
    await vi.advanceTimersByTimeAsync(59_999);
    expect(prunes).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    await eventually(() => expect(pruned()).toBe(2));
    expect(await remaining(queue)).toEqual([]);
    expect(prunes).toBe(2);

    const afterStop = await endedAgo(queue, clock, 10 * dayMs, memoryMaintenanceKind);
    clock.set(now + 2 * dayMs);
    await retention.stop();
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    expect(prunes).toBe(2);
    expect(await remaining(queue)).toEqual([afterStop]);
  });

  it('logs a prune the database refused, leaves the queue working, and prunes at the next interval', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const faulty = createFaultyDatabase(getDb());
    const clock = createManualClock(now);
    const queue = queueOn(faulty, clock);
    const old = await endedAgo(queue, clock, 2 * dayMs, memoryMaintenanceKind);
    clock.set(now);
    const logger = capturingLogger();
    const retention = createWorkRetention({ queue, intervalMs: 60_000, clock, logger });

    faulty.failWrites();
    retention.start();
    await eventually(() => expect(logger.lines.map((line) => line.level)).toEqual(['warn']));
    expect(logger.lines[0]!.object.err).toMatchObject({ code: ErrorCodes.storeUnavailable });
    expect(await remaining(queue)).toContain(old);

    faulty.heal();
    const submitted = await queue.submit({ kind: 'task', description: 'after the disk was freed' });
    await vi.advanceTimersByTimeAsync(60_000);
    await eventually(() => expect(logger.lines.map((line) => line.level)).toEqual(['warn', 'info']));
    expect(logger.lines[1]!.object).toEqual({ deleted: 1 });
    expect(await remaining(queue)).toEqual([submitted.id]);
    await retention.stop();
  });
});

describe('the retention options of the work section', () => {
  it('keep 30 days, one for system work, 0 for ever, and refuse negative days', () => {
    expect(workConfigSchema.parse({})).toMatchObject({ retainEndedDays: 30, retainEndedSystemDays: 1 });
    expect(workConfigSchema.parse(undefined)).toMatchObject({
      retainEndedDays: 30,
      retainEndedSystemDays: 1,
    });
    expect(workConfigSchema.parse({ retainEndedDays: 0, retainEndedSystemDays: 0.25 })).toMatchObject({
      retainEndedDays: 0,
      retainEndedSystemDays: 0.25,
    });
    expect(workConfigSchema.safeParse({ retainEndedDays: -1 }).success).toBe(false);
    expect(workConfigSchema.safeParse({ retainEndedSystemDays: -1 }).success).toBe(false);
  });
});
