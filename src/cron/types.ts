import { Cron } from 'croner';
import { z } from 'zod';
import { ErrorCodes, UserInputError } from '../util/index.js';

/**
 * When a job runs, in OpenClaw's shapes: a cron expression (5 or 6 fields, optional IANA time zone), a fixed
 * interval from an anchor, or once at an ISO date-time.
 */
export const cronScheduleSchema = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('cron'),
    expr: z.string().min(1).max(200),
    tz: z.string().min(1).max(100).optional(),
  }),
  z.object({
    kind: z.literal('every'),
    /** At least a second: a tighter loop is a bug, not a schedule. */
    everyMs: z
      .number()
      .int()
      .min(1_000)
      .max(366 * 24 * 3_600_000),
    anchorMs: z.number().int().min(0).optional(),
  }),
  z.object({ kind: z.literal('at'), at: z.string().min(1).max(100) }),
]);
export type CronSchedule = z.infer<typeof cronScheduleSchema>;

/**
 * What a job does when due: `agentTurn` sends `message` to the job's session as a chat message (a run of the
 * agent, in that session's history); `task` submits a work item for the agent's workers (in `agentd work
 * list`).
 */
export const cronPayloadSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('agentTurn'), message: z.string().min(1).max(20_000) }),
  z.object({
    kind: z.literal('task'),
    title: z.string().min(1).max(200).optional(),
    description: z.string().min(1).max(20_000),
    priority: z.number().int().min(-1000).max(1000).optional(),
  }),
]);
export type CronPayload = z.infer<typeof cronPayloadSchema>;

export type CronRunStatus = 'ok' | 'error';

export interface CronJob {
  id: string;
  name: string;
  description: string;
  agentId: string;
  sessionKey: string;
  schedule: CronSchedule;
  payload: CronPayload;
  enabled: boolean;
  deleteAfterRun: boolean;
  /** Undefined when the schedule has no future run (an `at` job that ran) or the job is disabled. */
  nextRunAtMs?: number;
  lastRunAtMs?: number;
  lastRunStatus?: CronRunStatus;
  lastError?: string;
  /** The work item the last run submitted (`task` jobs). */
  lastWorkItemId?: string;
  /** The chat run the last run started (`agentTurn` jobs). */
  lastRunId?: string;
  runCount: number;
  createdAtMs: number;
  updatedAtMs: number;
}

export interface CronJobInput {
  name: string;
  description?: string;
  agentId: string;
  sessionKey: string;
  schedule: CronSchedule;
  payload: CronPayload;
  enabled?: boolean;
  deleteAfterRun?: boolean;
}

/** Error details code for a schedule that does not parse or never fires. */
export const invalidScheduleCode = 'CRON_INVALID_SCHEDULE';

function invalidSchedule(message: string): UserInputError {
  return new UserInputError({
    code: ErrorCodes.invalidRequest,
    message,
    details: { code: invalidScheduleCode },
  });
}

/** Parses an ISO date-time; only absolute ones (with `Z` or an offset) so a job never depends on the host's zone. */
function parseAt(at: string): number {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(at)) {
    throw invalidSchedule(`schedule.at ${JSON.stringify(at)} must be an ISO date-time with Z or an offset`);
  }
  const ms = Date.parse(at);
  if (!Number.isFinite(ms)) throw invalidSchedule(`schedule.at ${JSON.stringify(at)} is not a date`);
  return ms;
}

function cronOf(schedule: Extract<CronSchedule, { kind: 'cron' }>): Cron {
  try {
    // Paused: croner only computes dates here; the scheduler owns the timer and the clock.
    return new Cron(schedule.expr, { paused: true, ...(schedule.tz ? { timezone: schedule.tz } : {}) });
  } catch (error) {
    throw invalidSchedule(
      `schedule.expr ${JSON.stringify(schedule.expr)}${schedule.tz ? ` (tz ${schedule.tz})` : ''} is not a valid cron expression: ${(error as Error).message}`,
    );
  }
}

/** Throws INVALID_REQUEST (details `CRON_INVALID_SCHEDULE`) for a schedule that cannot fire. */
export function validateSchedule(schedule: CronSchedule, nowMs: number): void {
  if (schedule.kind === 'at') parseAt(schedule.at);
  if (schedule.kind === 'cron') {
    const cron = cronOf(schedule);
    let next: Date | null;
    try {
      next = cron.nextRun(new Date(nowMs));
    } catch (error) {
      // croner checks the time zone only when it computes a date.
      throw invalidSchedule(
        `schedule.tz ${JSON.stringify(schedule.tz)} is not usable: ${(error as Error).message}`,
      );
    }
    if (!next) throw invalidSchedule(`schedule.expr ${JSON.stringify(schedule.expr)} never fires`);
  }
}

/**
 * The first run strictly after `afterMs`, or undefined when there is none. `at` jobs fire once: at their
 * time, or at once when it passed before they ever ran (`lastRunAtMs` undefined).
 */
export function nextRunAfter(
  schedule: CronSchedule,
  afterMs: number,
  anchor: { createdAtMs: number; lastRunAtMs?: number | undefined },
): number | undefined {
  switch (schedule.kind) {
    case 'at': {
      if (anchor.lastRunAtMs !== undefined) return undefined;
      return parseAt(schedule.at);
    }
    case 'every': {
      const start = schedule.anchorMs ?? anchor.createdAtMs;
      if (afterMs < start) return start;
      return start + (Math.floor((afterMs - start) / schedule.everyMs) + 1) * schedule.everyMs;
    }
    case 'cron':
      return cronOf(schedule).nextRun(new Date(afterMs))?.getTime();
  }
}
