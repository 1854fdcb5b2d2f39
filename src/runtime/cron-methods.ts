import { z } from 'zod';
import { type CronJob, type CronScheduler, cronPayloadSchema, cronScheduleSchema } from '../cron/index.js';
import { type MethodTable, OperatorScopes, resolveSessionKey } from '../gateway/index.js';
import { ErrorCodes, UserInputError } from '../util/index.js';

const agentIdParam = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, 'an agent id');
const sessionKeyParam = z.string().min(1).max(256);

/** OpenClaw addresses a job as `id` or, in older clients, `jobId`. */
const jobRef = <T extends z.ZodRawShape>(shape: T) =>
  z
    .looseObject({
      id: z.string().min(1).max(128).optional(),
      jobId: z.string().min(1).max(128).optional(),
      ...shape,
    })
    .refine((value) => value.id !== undefined || value.jobId !== undefined, {
      message: 'id is required',
      path: ['id'],
    })
    .transform((value) => ({ ...value, id: (value.id ?? value.jobId) as string }));

/**
 * Where the job's messages and work go, in OpenClaw's terms: `main` is the agent's main session, `isolated`
 * a session of the job's own, `session:<key>` (or `sessionKey`) an exact session.
 */
const sessionTargetParam = z.union([
  z.enum(['main', 'isolated']),
  z.string().regex(/^session:.+$/, 'main, isolated or session:<key>'),
]);

/** A job as OpenClaw's CronJob: its scheduler state both flat and under `state`, plus agentd's extras. */
export function cronJobView(job: CronJob): Record<string, unknown> {
  const state = {
    ...(job.nextRunAtMs !== undefined ? { nextRunAtMs: job.nextRunAtMs } : {}),
    ...(job.lastRunAtMs !== undefined ? { lastRunAtMs: job.lastRunAtMs } : {}),
    ...(job.lastRunStatus !== undefined ? { lastRunStatus: job.lastRunStatus } : {}),
    ...(job.lastError !== undefined ? { lastError: job.lastError } : {}),
  };
  return {
    id: job.id,
    name: job.name,
    description: job.description,
    agentId: job.agentId,
    sessionKey: job.sessionKey,
    enabled: job.enabled,
    deleteAfterRun: job.deleteAfterRun,
    createdAtMs: job.createdAtMs,
    updatedAtMs: job.updatedAtMs,
    schedule: job.schedule,
    sessionTarget: `session:${job.sessionKey}`,
    wakeMode: 'now',
    payload: job.payload,
    state,
    ...state,
    runCount: job.runCount,
    ...(job.lastWorkItemId !== undefined ? { lastWorkItemId: job.lastWorkItemId } : {}),
    ...(job.lastRunId !== undefined ? { lastRunId: job.lastRunId } : {}),
  };
}

/** `cron.list|add|remove|run` (OpenClaw's names and shapes) on agentd's scheduler. */
export function registerCronMethods(options: { methods: MethodTable; cron: CronScheduler }): void {
  const { methods, cron } = options;
  const { read, admin } = OperatorScopes;

  methods.register('cron.list', {
    scopes: [read],
    params: z.looseObject({
      agentId: agentIdParam.optional(),
      includeDisabled: z.boolean().default(false),
      limit: z.number().int().min(1).max(200).default(50),
      offset: z.number().int().min(0).default(0),
    }),
    async handler(params) {
      const all = await cron.list({
        includeDisabled: params.includeDisabled,
        ...(params.agentId !== undefined ? { agentId: params.agentId } : {}),
      });
      const page = all.slice(params.offset, params.offset + params.limit);
      return {
        jobs: page.map(cronJobView),
        total: all.length,
        offset: params.offset,
        limit: params.limit,
        hasMore: params.offset + page.length < all.length,
      };
    },
  });

  // Jobs act on their own later, with the agent's tools: creating and running them is an admin's call.
  methods.register('cron.add', {
    scopes: [admin],
    params: z.looseObject({
      name: z.string().min(1).max(200),
      description: z.string().max(2_000).optional(),
      agentId: agentIdParam.nullable().optional(),
      sessionKey: sessionKeyParam.nullable().optional(),
      sessionTarget: sessionTargetParam.default('main'),
      wakeMode: z.enum(['now', 'next-heartbeat']).default('now'),
      enabled: z.boolean().default(true),
      deleteAfterRun: z.boolean().default(false),
      schedule: cronScheduleSchema,
      payload: cronPayloadSchema,
    }),
    async handler(params) {
      if (params.wakeMode !== 'now') {
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message:
            'wakeMode "next-heartbeat" is not supported: agentd runs a due job at once (wakeMode "now")',
        });
      }
      const agentId = params.agentId ?? 'main';
      const target = params.sessionKey
        ? params.sessionKey
        : params.sessionTarget === 'main'
          ? `agent:${agentId}:main`
          : params.sessionTarget === 'isolated'
            ? `agent:${agentId}:cron-${params.name
                .toLowerCase()
                .replace(/[^a-z0-9_-]+/g, '-')
                .slice(0, 64)}`
            : params.sessionTarget.slice('session:'.length);
      const { sessionKey, agentId: owner } = resolveSessionKey(target, agentId);
      if (owner !== agentId && params.agentId) {
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: `session ${sessionKey} belongs to agent ${owner}, not ${agentId}`,
        });
      }
      const job = await cron.add({
        name: params.name,
        ...(params.description !== undefined ? { description: params.description } : {}),
        agentId: owner,
        sessionKey,
        schedule: params.schedule,
        payload: params.payload,
        enabled: params.enabled,
        deleteAfterRun: params.deleteAfterRun,
      });
      return cronJobView(job);
    },
  });

  methods.register('cron.remove', {
    scopes: [admin],
    params: jobRef({}),
    async handler(params) {
      await cron.remove(params.id);
      return { ok: true, removed: true, id: params.id };
    },
  });

  methods.register('cron.run', {
    scopes: [admin],
    params: jobRef({ mode: z.enum(['force', 'due', 'if-enabled']).default('force') }),
    async handler(params) {
      if (params.mode === 'if-enabled') {
        const job = await cron.get(params.id);
        if (!job)
          throw new UserInputError({ code: ErrorCodes.notFound, message: `no cron job ${params.id}` });
        if (!job.enabled) return { ok: true, ran: false, id: params.id, reason: 'disabled' };
      }
      const result = await cron.run(params.id, { mode: params.mode === 'due' ? 'due' : 'force' });
      if (!result) return { ok: true, ran: false, id: params.id, reason: 'not-due' };
      return {
        ok: true,
        ran: true,
        id: params.id,
        status: result.status,
        ranAtMs: result.ranAtMs,
        ...(result.runId !== undefined ? { runId: result.runId } : {}),
        ...(result.workItemId !== undefined ? { workItemId: result.workItemId } : {}),
        ...(result.error !== undefined ? { error: result.error } : {}),
      };
    },
  });
}
