import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type CronActions,
  type CronScheduler,
  createCronScheduler,
  invalidScheduleCode,
  nextRunAfter,
} from '../../src/cron/index.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { createIdGenerator, ErrorCodes, SystemError, silentLogger } from '../../src/util/index.js';
import { createWorkQueue } from '../../src/work/index.js';
import { describeEachDatabase, openTestDatabase } from '../helpers/databases.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';

const start = Date.UTC(2026, 0, 1, 0, 0, 0);

/** Chat as chat.send does it: a key it has seen answers that run, and sends nothing. */
function recordingActions(options: { failChat?: boolean } = {}) {
  const chats: Array<{ sessionKey: string; text: string; idempotencyKey: string }> = [];
  const work: Array<Parameters<CronActions['submitWork']>[0]> = [];
  const actions: CronActions = {
    async sendChat(input) {
      if (options.failChat) throw new Error('chat is down');
      if (!chats.some((chat) => chat.idempotencyKey === input.idempotencyKey)) chats.push(input);
      return { runId: input.idempotencyKey };
    },
    async submitWork(input) {
      work.push(input);
      return { id: `wi-${work.length}` };
    },
  };
  return { actions, chats, work };
}

describe('nextRunAfter', () => {
  it('computes cron (with a time zone), interval and one-shot schedules', () => {
    expect(nextRunAfter({ kind: 'cron', expr: '*/5 * * * *' }, start, { createdAtMs: start })).toBe(
      start + 5 * 60_000,
    );
    // 09:00 in Berlin is 08:00 UTC in January.
    expect(
      nextRunAfter({ kind: 'cron', expr: '0 9 * * *', tz: 'Europe/Berlin' }, start, { createdAtMs: start }),
    ).toBe(start + 8 * 3_600_000);
    const every = { kind: 'every' as const, everyMs: 60_000 };
    expect(nextRunAfter(every, start, { createdAtMs: start })).toBe(start + 60_000);
    expect(nextRunAfter(every, start + 90_000, { createdAtMs: start })).toBe(start + 120_000);
    expect(nextRunAfter({ ...every, anchorMs: start + 10_000 }, start, { createdAtMs: start })).toBe(
      start + 10_000,
    );
    const at = { kind: 'at' as const, at: '2026-01-02T00:00:00Z' };
    expect(nextRunAfter(at, start, { createdAtMs: start })).toBe(start + 86_400_000);
    expect(nextRunAfter(at, start, { createdAtMs: start, lastRunAtMs: start })).toBeUndefined();
  });
});

describeEachDatabase('cron scheduler', (getDb) => {
  let now = start;
  const clock = { now: () => now };
  let scheduler: CronScheduler | undefined;

  const create = (db: SqlDatabase, actions: CronActions) =>
    createCronScheduler({ db, actions, clock, idGenerator: createIdGenerator(), logger: silentLogger });

  beforeEach(() => {
    now = start;
  });

  afterEach(() => {
    scheduler?.stop();
    scheduler = undefined;
    vi.useRealTimers();
  });

  it('refuses schedules that cannot fire with INVALID_REQUEST and a stable detail code', async () => {
    scheduler = create(getDb(), recordingActions().actions);
    const base = {
      name: 'bad',
      agentId: 'main',
      sessionKey: 'agent:main:main',
      payload: { kind: 'agentTurn' as const, message: 'hi' },
    };
    for (const schedule of [
      { kind: 'cron' as const, expr: 'not a cron' },
      { kind: 'cron' as const, expr: '* * * * *', tz: 'Nowhere/Atlantis' },
      { kind: 'cron' as const, expr: '0 0 30 2 *' },
      { kind: 'at' as const, at: 'tomorrow' },
      { kind: 'at' as const, at: '2026-01-02T00:00:00' },
    ]) {
      await expect(scheduler.add({ ...base, schedule })).rejects.toMatchObject({
        code: 'INVALID_REQUEST',
        details: { code: invalidScheduleCode },
      });
    }
    expect(await scheduler.list({ includeDisabled: true })).toEqual([]);
  });

  it('runs a due interval job on tick: a chat message, then again one interval later', async () => {
    const { actions, chats } = recordingActions();
    scheduler = create(getDb(), actions);
    const job = await scheduler.add({
      name: 'ping',
      agentId: 'main',
      sessionKey: 'agent:main:main',
      schedule: { kind: 'every', everyMs: 60_000 },
      payload: { kind: 'agentTurn', message: 'status please' },
    });
    expect(job).toMatchObject({ enabled: true, nextRunAtMs: start + 60_000, runCount: 0 });
    expect(await scheduler.tick()).toEqual([]);
    now = start + 60_000;
    const [result] = await scheduler.tick();
    expect(result).toMatchObject({ jobId: job.id, status: 'ok', runId: `cron:${job.id}:${now}` });
    expect(chats).toEqual([
      {
        sessionKey: 'agent:main:main',
        agentId: 'main',
        text: 'status please',
        idempotencyKey: result!.runId,
      },
    ]);
    expect(await scheduler.get(job.id)).toMatchObject({
      lastRunAtMs: start + 60_000,
      lastRunStatus: 'ok',
      lastRunId: result!.runId,
      nextRunAtMs: start + 120_000,
      runCount: 1,
    });
    // Nothing more until the next occurrence.
    expect(await scheduler.tick()).toEqual([]);
  });

  it('submits a work item for task jobs, and records a failed run without losing the schedule', async () => {
    const { actions, work } = recordingActions({ failChat: true });
    scheduler = create(getDb(), actions);
    const task = await scheduler.add({
      name: 'digest',
      agentId: 'main',
      sessionKey: 'agent:main:reports',
      schedule: { kind: 'cron', expr: '0 * * * *' },
      payload: { kind: 'task', description: 'Summarise the last hour.', priority: 5 },
    });
    const result = await scheduler.run(task.id);
    expect(result).toMatchObject({ status: 'ok', workItemId: 'wi-1' });
    expect(work[0]).toMatchObject({
      kind: 'task',
      title: 'digest',
      description: 'Summarise the last hour.',
      agentId: 'main',
      sessionKey: 'agent:main:reports',
      priority: 5,
      source: `cron:${task.id}`,
    });
    expect(await scheduler.get(task.id)).toMatchObject({
      lastWorkItemId: 'wi-1',
      nextRunAtMs: start + 3_600_000,
    });

    const chat = await scheduler.add({
      name: 'broken',
      agentId: 'main',
      sessionKey: 'agent:main:main',
      schedule: { kind: 'every', everyMs: 1_000 },
      payload: { kind: 'agentTurn', message: 'hi' },
    });
    const failed = await scheduler.run(chat.id);
    expect(failed).toMatchObject({ status: 'error', error: 'chat is down' });
    expect(await scheduler.get(chat.id)).toMatchObject({
      lastRunStatus: 'error',
      lastError: 'chat is down',
      nextRunAtMs: start + 1_000,
    });
  });

  it('runs a one-shot job once, and deletes it after the run when asked', async () => {
    const { actions, chats } = recordingActions();
    scheduler = create(getDb(), actions);
    const once = await scheduler.add({
      name: 'once',
      agentId: 'main',
      sessionKey: 'agent:main:main',
      schedule: { kind: 'at', at: '2026-01-01T00:10:00Z' },
      payload: { kind: 'agentTurn', message: 'reminder' },
    });
    const gone = await scheduler.add({
      name: 'gone',
      agentId: 'main',
      sessionKey: 'agent:main:main',
      deleteAfterRun: true,
      schedule: { kind: 'at', at: '2026-01-01T00:10:00Z' },
      payload: { kind: 'agentTurn', message: 'vanish' },
    });
    now = start + 11 * 60_000;
    expect((await scheduler.tick()).map((result) => result.jobId).sort()).toEqual([once.id, gone.id].sort());
    expect(await scheduler.tick()).toEqual([]);
    expect(chats.map((chat) => chat.text).sort()).toEqual(['reminder', 'vanish']);
    const kept = await scheduler.get(once.id);
    expect(kept).toMatchObject({ runCount: 1 });
    expect(kept?.nextRunAtMs).toBeUndefined();
    expect(await scheduler.get(gone.id)).toBeUndefined();
  });

  it('runs each occurrence once when two schedulers (two processes) share the database', async () => {
    const first = recordingActions();
    const second = recordingActions();
    scheduler = create(getDb(), first.actions);
    const other = create(getDb(), second.actions);
    await scheduler.add({
      name: 'shared',
      agentId: 'main',
      sessionKey: 'agent:main:main',
      schedule: { kind: 'every', everyMs: 60_000 },
      payload: { kind: 'agentTurn', message: 'once please' },
    });
    now = start + 60_000;
    const results = await Promise.all([scheduler.tick(), other.tick()]);
    expect(results.flat()).toHaveLength(1);
    expect(first.chats.length + second.chats.length).toBe(1);
  });

  it('answers STORE_UNAVAILABLE for a run whose record is refused, and its retry sends no second message', async () => {
    const db = createFaultyDatabase(getDb());
    const recording = recordingActions();
    // The first message is accepted, then the disk fills before its run is recorded.
    let fillsUp = true;
    scheduler = create(db, {
      ...recording.actions,
      async sendChat(input) {
        const sent = await recording.actions.sendChat(input);
        if (fillsUp) db.failWrites();
        fillsUp = false;
        return sent;
      },
    });
    const job = await scheduler.add({
      name: 'report',
      agentId: 'main',
      sessionKey: 'agent:main:main',
      schedule: { kind: 'cron', expr: '0 * * * *' },
      payload: { kind: 'agentTurn', message: 'report please' },
    });
    await expect(scheduler.run(job.id)).rejects.toMatchObject({ code: ErrorCodes.storeUnavailable });
    expect(await scheduler.get(job.id)).toMatchObject({ runCount: 0 });
    expect(recording.chats).toHaveLength(1);

    db.heal();
    now = start + 5_000;
    const retried = await scheduler.run(job.id);
    expect(retried).toMatchObject({ status: 'ok', runId: recording.chats[0]!.idempotencyKey });
    expect(recording.chats).toHaveLength(1);
    expect(await scheduler.get(job.id)).toMatchObject({
      runCount: 1,
      lastRunAtMs: start + 5_000,
      lastRunId: retried!.runId,
    });

    // A recorded run is over: the next call is a run of its own.
    const next = await scheduler.run(job.id);
    expect(next!.runId).not.toBe(retried!.runId);
    expect(recording.chats).toHaveLength(2);
    expect(await scheduler.get(job.id)).toMatchObject({ runCount: 2 });
  });

  it('retries a task run whose record was refused without submitting a second work item', async () => {
    const db = createFaultyDatabase(getDb());
    const queue = createWorkQueue({ db });
    let fillsUp = true;
    try {
      scheduler = create(db, {
        ...recordingActions().actions,
        async submitWork(input) {
          const { id } = await queue.submit(input);
          if (fillsUp) db.failWrites();
          fillsUp = false;
          return { id };
        },
      });
      const job = await scheduler.add({
        name: 'digest',
        agentId: 'main',
        sessionKey: 'agent:main:reports',
        schedule: { kind: 'cron', expr: '0 * * * *' },
        payload: { kind: 'task', description: 'Summarise the last hour.' },
      });
      await expect(scheduler.run(job.id)).rejects.toMatchObject({ code: ErrorCodes.storeUnavailable });

      db.heal();
      now = start + 5_000;
      const retried = await scheduler.run(job.id);
      const items = (await queue.list({ sessionKey: 'agent:main:reports' })).filter(
        (item) => item.state !== 'merged',
      );
      expect(items.map((item) => item.id)).toEqual([retried!.workItemId]);
      expect(await scheduler.get(job.id)).toMatchObject({
        runCount: 1,
        lastRunAtMs: start + 5_000,
        lastWorkItemId: retried!.workItemId,
      });
    } finally {
      await queue.close();
    }
  });

  it('runs a job twice when it is run twice at once', async () => {
    const { actions, chats } = recordingActions();
    scheduler = create(getDb(), actions);
    const job = await scheduler.add({
      name: 'twice',
      agentId: 'main',
      sessionKey: 'agent:main:main',
      schedule: { kind: 'cron', expr: '0 * * * *' },
      payload: { kind: 'agentTurn', message: 'hello' },
    });
    const [first, second] = await Promise.all([scheduler.run(job.id), scheduler.run(job.id)]);
    expect(first!.runId).not.toBe(second!.runId);
    expect(chats).toHaveLength(2);
    expect(await scheduler.get(job.id)).toMatchObject({ runCount: 2 });
  });

  it('fires from its own timer (fake timers), keeps jobs across a restart, and removes them', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { actions, chats } = recordingActions();
    const db = getDb();
    const before = create(db, actions);
    const job = await before.add({
      name: 'tick',
      agentId: 'main',
      sessionKey: 'agent:main:main',
      schedule: { kind: 'every', everyMs: 30_000 },
      payload: { kind: 'agentTurn', message: 'tock' },
    });
    // A restart: a new scheduler on the same database finds the job and arms its timer.
    scheduler = create(db, actions);
    expect((await scheduler.list()).map((listed) => listed.id)).toEqual([job.id]);
    scheduler.start();
    now = start + 30_000;
    // The timer is armed after a database read; keep moving fake time until it has fired.
    await vi.waitFor(async () => {
      await vi.advanceTimersByTimeAsync(30_000);
      expect(chats).toHaveLength(1);
    });
    await scheduler.remove(job.id);
    await expect(scheduler.remove(job.id)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(scheduler.run(job.id)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    now = start + 60_000;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(chats).toHaveLength(1);
  });
});

// Timers and claims, not SQL: one dialect, whose statements settle within fake time's microtask flushes.
describe('cron scheduler on a full disk', () => {
  let db: SqlDatabase;
  let now = start;
  let scheduler: CronScheduler | undefined;
  beforeEach(async () => {
    db = await openTestDatabase('sqlite');
    now = start;
  });
  afterEach(async () => {
    scheduler?.stop();
    scheduler = undefined;
    vi.useRealTimers();
    await db.close();
  });

  /** A scheduler on `database` with a 30 s job, made at `start`: due once `now` moves on by 30 s. */
  const startWithDueJob = async (database: SqlDatabase, actions: CronActions) => {
    scheduler = createCronScheduler({
      db: database,
      actions,
      clock: { now: () => now },
      idGenerator: createIdGenerator(),
      logger: silentLogger,
    });
    await scheduler.add({
      name: 'tick',
      agentId: 'main',
      sessionKey: 'agent:main:main',
      schedule: { kind: 'every', everyMs: 30_000 },
      payload: { kind: 'agentTurn', message: 'tock' },
    });
  };

  it('waits longer after each failed tick while the disk is full, and fires the due job once it is back', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { actions, chats } = recordingActions();
    const faulty = createFaultyDatabase(db);
    await startWithDueJob(faulty, actions);
    faulty.failWrites();
    now = start + 30_000;
    scheduler!.start();
    // The job is due, and its claim (an UPDATE) fails: a tick that retried at once would spin here.
    await vi.waitFor(() => expect(faulty.refused).toBe(1));
    for (let step = 0; step < 50; step++) await vi.advanceTimersByTimeAsync(10);
    expect(faulty.refused).toBe(1);
    // Then 1 s, 2 s, 4 s: one more failed claim each.
    await vi.advanceTimersByTimeAsync(1_000);
    expect(faulty.refused).toBe(2);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(faulty.refused).toBe(3);
    expect(chats).toHaveLength(0);
    faulty.heal();
    await vi.advanceTimersByTimeAsync(4_000);
    await vi.waitFor(() => expect(chats).toHaveLength(1));
  });

  it('arms its timer again after a read that failed, instead of stopping until the next change', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { actions, chats } = recordingActions();
    let readsFail = false;
    const unavailable = () =>
      new SystemError({
        code: ErrorCodes.storeUnavailable,
        message: 'the database does not answer',
        retryable: true,
      });
    // The database as the scheduler sees it, whose reads fail while `readsFail` is set.
    const flaky = new Proxy(db, {
      get(target, property) {
        if (property === 'get')
          return (...args: Parameters<SqlDatabase['get']>) =>
            readsFail ? Promise.reject(unavailable()) : target.get(...args);
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    await startWithDueJob(flaky, actions);
    now = start + 30_000;
    readsFail = true;
    scheduler!.start();
    await vi.advanceTimersByTimeAsync(500);
    readsFail = false;
    expect(chats).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1_000);
    await vi.waitFor(() => expect(chats).toHaveLength(1));
  });
});
