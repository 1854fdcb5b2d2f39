import type { SqlDatabase, SqlValue } from '../store/index.js';
import type { Clock, IdGenerator, Logger } from '../util/index.js';
import { createBackoffTimer, createKeyedMutex, ErrorCodes, UserInputError } from '../util/index.js';
import {
  type CronJob,
  type CronJobInput,
  type CronPayload,
  type CronSchedule,
  nextRunAfter,
  validateSchedule,
} from './types.js';

/** What a due job does, supplied by the composition root (the scheduler knows neither chat nor work). */
export interface CronActions {
  /** Sends `text` to the session as a chat message; resolves when the run was accepted. */
  sendChat(input: { sessionKey: string; agentId: string; text: string; idempotencyKey: string }): Promise<{
    runId: string;
  }>;
  /** Submits a work item; resolves with its id. */
  submitWork(input: {
    kind: string;
    title: string;
    description: string;
    agentId: string;
    sessionKey: string;
    priority?: number;
    dedupKey: string;
    source: string;
  }): Promise<{ id: string }>;
}

export interface CronRunResult {
  jobId: string;
  status: 'ok' | 'error';
  ranAtMs: number;
  workItemId?: string;
  runId?: string;
  error?: string;
}

export interface CronScheduler {
  add(input: CronJobInput): Promise<CronJob>;
  list(filter?: { agentId?: string; includeDisabled?: boolean }): Promise<CronJob[]>;
  get(id: string): Promise<CronJob | undefined>;
  /** Throws NOT_FOUND for an unknown id. */
  remove(id: string): Promise<void>;
  /**
   * Runs a job now, whatever its schedule (`due`: only when it is due). Throws NOT_FOUND for an unknown id.
   * A forced run whose record was refused is the same run when tried again: its message or work item is
   * not made twice.
   */
  run(id: string, options?: { mode?: 'force' | 'due' }): Promise<CronRunResult | undefined>;
  /** Runs every due job; the timer calls it, tests may too. */
  tick(): Promise<CronRunResult[]>;
  /** Arms the timer for the next due job (and keeps re-arming it). */
  start(): void;
  stop(): void;
}

interface CronRow {
  id: string;
  name: string;
  description: string;
  agent_id: string;
  session_key: string;
  schedule: string;
  payload: string;
  enabled: number;
  delete_after_run: number;
  next_run_at: number | null;
  last_run_at: number | null;
  last_status: string | null;
  last_error: string | null;
  last_work_item_id: string | null;
  last_run_id: string | null;
  run_count: number;
  created_at: number;
  updated_at: number;
}

function jobOf(row: CronRow): CronJob {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    agentId: row.agent_id,
    sessionKey: row.session_key,
    schedule: JSON.parse(row.schedule) as CronSchedule,
    payload: JSON.parse(row.payload) as CronPayload,
    enabled: Boolean(Number(row.enabled)),
    deleteAfterRun: Boolean(Number(row.delete_after_run)),
    ...(row.next_run_at !== null ? { nextRunAtMs: Number(row.next_run_at) } : {}),
    ...(row.last_run_at !== null ? { lastRunAtMs: Number(row.last_run_at) } : {}),
    ...(row.last_status !== null ? { lastRunStatus: row.last_status as 'ok' | 'error' } : {}),
    ...(row.last_error !== null ? { lastError: row.last_error } : {}),
    ...(row.last_work_item_id !== null ? { lastWorkItemId: row.last_work_item_id } : {}),
    ...(row.last_run_id !== null ? { lastRunId: row.last_run_id } : {}),
    runCount: Number(row.run_count),
    createdAtMs: Number(row.created_at),
    updatedAtMs: Number(row.updated_at),
  };
}

/** The longest the timer sleeps, so a clock that jumps (suspend, NTP) is noticed within a minute. */
const maxSleepMs = 60_000;
/** The wait after a first failed tick or arming; it doubles with each failure after it, up to `maxSleepMs`. */
const firstFailureWaitMs = 1_000;

/**
 * Persisted cron jobs and the timer that runs them. A due job is claimed by moving its `next_run_at` forward
 * with a compare-and-set, so with several processes on one Postgres each occurrence runs once. Runs missed
 * while agentd was down are not replayed: a job that was due fires once, then follows its schedule.
 */
export function createCronScheduler(options: {
  db: SqlDatabase;
  actions: CronActions;
  clock: Clock;
  idGenerator: IdGenerator;
  logger: Logger;
}): CronScheduler {
  const { db, actions, clock, idGenerator, logger } = options;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running = false;

  const get = async (id: string) => {
    const row = await db.get<CronRow>('SELECT * FROM cron_jobs WHERE id = ?', [id]);
    return row ? jobOf(row) : undefined;
  };

  const mustGet = async (id: string) => {
    const job = await get(id);
    if (!job) throw new UserInputError({ code: ErrorCodes.notFound, message: `no cron job ${id}` });
    return job;
  };

  const nextFor = (job: Pick<CronJob, 'schedule' | 'createdAtMs' | 'lastRunAtMs'>, afterMs: number) => {
    try {
      return nextRunAfter(job.schedule, afterMs, job);
    } catch (error) {
      logger.warn({ err: error, schedule: job.schedule }, 'cron: schedule has no next run');
      return undefined;
    }
  };

  /**
   * Does what the job says and records the outcome; a failed action is the run's status, a refused record
   * throws. `occurrence` names the run in the action's idempotency key, so that doing it again for the same
   * occurrence answers the first message or work item instead of making another.
   */
  const execute = async (job: CronJob, occurrence: string): Promise<CronRunResult> => {
    const ranAtMs = clock.now();
    const runKey = `cron:${job.id}:${occurrence}`;
    let result: CronRunResult;
    try {
      if (job.payload.kind === 'agentTurn') {
        const { runId } = await actions.sendChat({
          sessionKey: job.sessionKey,
          agentId: job.agentId,
          text: job.payload.message,
          idempotencyKey: runKey,
        });
        result = { jobId: job.id, status: 'ok', ranAtMs, runId };
      } else {
        const { id } = await actions.submitWork({
          kind: 'task',
          title: job.payload.title ?? job.name,
          description: job.payload.description,
          agentId: job.agentId,
          sessionKey: job.sessionKey,
          ...(job.payload.priority !== undefined ? { priority: job.payload.priority } : {}),
          dedupKey: runKey,
          source: `cron:${job.id}`,
        });
        result = { jobId: job.id, status: 'ok', ranAtMs, workItemId: id };
      }
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      logger.warn({ jobId: job.id, err: error }, 'cron: job run failed');
      result = { jobId: job.id, status: 'error', ranAtMs, error: message.slice(0, 2_000) };
    }
    const lastRunAtMs = ranAtMs;
    const next = job.enabled ? nextFor({ ...job, lastRunAtMs }, ranAtMs) : undefined;
    if (job.deleteAfterRun && next === undefined) {
      await db.run('DELETE FROM cron_jobs WHERE id = ?', [job.id]);
    } else {
      await db.run(
        `UPDATE cron_jobs SET last_run_at = ?, last_status = ?, last_error = ?, last_work_item_id = ?,
           last_run_id = ?, run_count = run_count + 1, next_run_at = ?, updated_at = ? WHERE id = ?`,
        [
          ranAtMs,
          result.status,
          result.error ?? null,
          result.workItemId ?? null,
          result.runId ?? null,
          next ?? null,
          ranAtMs,
          job.id,
        ],
      );
    }
    logger.info(
      { jobId: job.id, status: result.status, workItemId: result.workItemId, runId: result.runId },
      'cron: job ran',
    );
    return result;
  };

  /** Claims one occurrence: only the process whose compare-and-set moves `next_run_at` runs it. */
  const claim = async (job: CronJob, nowMs: number): Promise<boolean> => {
    const { changes } = await db.run(
      'UPDATE cron_jobs SET next_run_at = ? WHERE id = ? AND enabled = 1 AND next_run_at = ?',
      [nextFor({ ...job, lastRunAtMs: nowMs }, nowMs) ?? null, job.id, job.nextRunAtMs as number],
    );
    return changes === 1;
  };

  const tick = async (): Promise<CronRunResult[]> => {
    const nowMs = clock.now();
    const due = await db.all<CronRow>(
      'SELECT * FROM cron_jobs WHERE enabled = 1 AND next_run_at IS NOT NULL AND next_run_at <= ? ORDER BY next_run_at, id',
      [nowMs],
    );
    const results: CronRunResult[] = [];
    for (const row of due) {
      const job = jobOf(row);
      if (await claim(job, nowMs)) results.push(await execute(job, String(job.nextRunAtMs)));
    }
    return results;
  };

  /**
   * After a failed tick (a full disk refuses a due job's claim) or arming (a read that fails), the next try
   * waits 1 s, doubling up to `maxSleepMs`, rather than claiming the same due job again at once, over and
   * over, in a loop that burns a core and floods the log; and an arming that failed still leaves a try to
   * come, rather than no timer until the next add or update.
   */
  const afterFailure = createBackoffTimer({
    firstDelayMs: firstFailureWaitMs,
    maxDelayMs: maxSleepMs,
    run: () => rearm(),
  });
  const failed = (error: unknown, what: string) => {
    logger.error({ err: error, retryMs: afterFailure.delayMs }, `cron: ${what} failed`);
    afterFailure.arm();
  };

  const arm = async () => {
    if (!running) return;
    const row = await db.get<{ next: number | null }>(
      'SELECT MIN(next_run_at) AS next FROM cron_jobs WHERE enabled = 1 AND next_run_at IS NOT NULL',
    );
    if (!running) return;
    clearTimeout(timer);
    const next = row?.next === null || row?.next === undefined ? undefined : Number(row.next);
    const delayMs = next === undefined ? maxSleepMs : Math.min(maxSleepMs, Math.max(0, next - clock.now()));
    timer = setTimeout(() => {
      tick().then(
        () => {
          afterFailure.reset();
          rearm();
        },
        (error: unknown) => failed(error, 'tick'),
      );
    }, delayMs);
    timer.unref?.();
  };

  const rearm = () => {
    arm().catch((error: unknown) => failed(error, 'arming the timer'));
  };

  /**
   * A forced run has no occurrence to claim: it is named by the run count it will record, which stays put
   * until a run is recorded, so a run whose record was refused (a full disk) has the same name when it is
   * tried again, and its message or work item is answered rather than made again. One at a time per job, so
   * that two calls which both get recorded stay two runs instead of sharing a name.
   */
  const manualRuns = createKeyedMutex();

  return {
    async add(input) {
      const nowMs = clock.now();
      validateSchedule(input.schedule, nowMs);
      const id = idGenerator('cron');
      const enabled = input.enabled ?? true;
      const next = enabled ? nextFor({ schedule: input.schedule, createdAtMs: nowMs }, nowMs) : undefined;
      const values: SqlValue[] = [
        id,
        input.name,
        input.description ?? '',
        input.agentId,
        input.sessionKey,
        JSON.stringify(input.schedule),
        JSON.stringify(input.payload),
        enabled ? 1 : 0,
        input.deleteAfterRun ? 1 : 0,
        next ?? null,
        nowMs,
        nowMs,
      ];
      await db.run(
        `INSERT INTO cron_jobs (id, name, description, agent_id, session_key, schedule, payload, enabled,
           delete_after_run, next_run_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        values,
      );
      rearm();
      return await mustGet(id);
    },
    async list(filter = {}) {
      const clauses: string[] = [];
      const params: SqlValue[] = [];
      if (!filter.includeDisabled) clauses.push('enabled = 1');
      if (filter.agentId !== undefined) {
        clauses.push('agent_id = ?');
        params.push(filter.agentId);
      }
      const rows = await db.all<CronRow>(
        `SELECT * FROM cron_jobs${clauses.length ? ` WHERE ${clauses.join(' AND ')}` : ''} ORDER BY created_at, id`,
        params,
      );
      return rows.map(jobOf);
    },
    get,
    async remove(id) {
      const { changes } = await db.run('DELETE FROM cron_jobs WHERE id = ?', [id]);
      if (changes === 0)
        throw new UserInputError({ code: ErrorCodes.notFound, message: `no cron job ${id}` });
      rearm();
    },
    run(id, runOptions = {}) {
      return manualRuns.run(id, async () => {
        const job = await mustGet(id);
        if (runOptions.mode === 'due') {
          if (!job.enabled || job.nextRunAtMs === undefined || job.nextRunAtMs > clock.now())
            return undefined;
          if (!(await claim(job, clock.now()))) return undefined;
        }
        const result = await execute(
          job,
          runOptions.mode === 'due' ? String(job.nextRunAtMs) : `run-${job.runCount + 1}`,
        );
        rearm();
        return result;
      });
    },
    tick,
    start() {
      if (running) return;
      running = true;
      rearm();
    },
    stop() {
      running = false;
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
