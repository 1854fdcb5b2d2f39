import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Clock } from '../util/index.js';
import { systemClock } from '../util/index.js';
import type { MethodTable } from './method-table.js';
import { OperatorScopes } from './scopes.js';
import type { GatewayServices, ModelEntry, SessionSummary } from './services.js';
import { defaultAgentId, mainKey, mainSessionKey, resolveSessionKey } from './session-key.js';

const { read, write } = OperatorScopes;

const sessionKeyParam = z.string().min(1).max(256);
const agentIdParam = z.string().min(1).max(64);

/**
 * The slash commands agentd itself answers in `chat.send` (see core-methods.ts). OpenClaw clients list them
 * with `commands.list` and offer them in their completion menus; anything else a user types is a message.
 */
export const chatCommands = [
  { name: 'new', description: 'Start a fresh session under the same key (the old one is archived).' },
  { name: 'reset', description: 'Reset the session (the old transcript is archived and recallable).' },
  { name: 'stop', description: 'Abort the running reply in this session.' },
] as const;

/** OpenClaw's session row: agentd's summary plus the model it runs on, split the way OpenClaw clients read it. */
export function sessionRow(summary: SessionSummary, model: ModelEntry): Record<string, unknown> {
  const override = summary.model;
  const slash = override?.indexOf('/') ?? -1;
  const modelProvider = override && slash > 0 ? override.slice(0, slash) : model.provider;
  const modelId = override ? (slash > 0 ? override.slice(slash + 1) : override) : model.id;
  return {
    ...summary,
    kind: 'direct',
    modelProvider,
    model: modelId,
    contextTokens: model.contextWindow,
    ...(summary.label !== undefined ? { displayName: summary.label } : {}),
  };
}

/** `sessions.list`-style defaults: the default agent, its main key and the model new sessions run on. */
export function sessionDefaults(services: GatewayServices): Record<string, unknown> {
  const model = services.models.forAgent(defaultAgentId);
  return {
    defaultAgentId,
    mainKey,
    mainSessionKey: mainSessionKey(defaultAgentId),
    modelProvider: model.provider,
    model: model.id,
    contextTokens: model.contextWindow,
  };
}

const sessionsListShape = {
  agentId: agentIdParam.optional(),
  limit: z.number().int().min(1).max(1000).optional(),
  includeArchived: z.boolean().optional(),
  search: z.string().max(200).optional(),
};

/**
 * The methods OpenClaw's own clients (the TUI, the CLI) call besides chat: the session-index subscription,
 * one session's description and creation, the command catalog, the model catalog, and the queues agentd
 * does not have (questions, plugin approvals, task suggestions), which it answers as empty.
 */
export function registerClientMethods(
  table: MethodTable,
  services: GatewayServices,
  options: { clock?: Clock } = {},
): void {
  const clock = options.clock ?? systemClock;

  table.declareEvents(['sessions.changed']);

  const listSessions = async (params: {
    agentId?: string | undefined;
    limit?: number | undefined;
    includeArchived?: boolean | undefined;
    search?: string | undefined;
  }) => {
    const sessions = await services.sessions.list({
      limit: params.limit ?? 100,
      includeArchived: params.includeArchived ?? false,
      ...(params.agentId !== undefined ? { agentId: params.agentId } : {}),
      ...(params.search !== undefined ? { search: params.search } : {}),
    });
    return {
      ts: clock.now(),
      count: sessions.length,
      defaults: sessionDefaults(services),
      sessions: sessions.map((summary) => sessionRow(summary, services.models.forAgent(summary.agentId))),
    };
  };

  table.register('sessions.subscribe', {
    scopes: [read],
    params: z.looseObject(sessionsListShape),
    async handler(params, context) {
      // Subscribed before the snapshot is read, so no change between the two is lost.
      context.subscribeSessions(true);
      const { agentId, limit, includeArchived, search } = params;
      const wantsList = [agentId, limit, includeArchived, search].some((value) => value !== undefined);
      return wantsList
        ? { subscribed: true, list: await listSessions({ agentId, limit, includeArchived, search }) }
        : { subscribed: true };
    },
  });

  table.register('sessions.unsubscribe', {
    scopes: [read],
    params: z.looseObject({}),
    handler(_params, context) {
      context.subscribeSessions(false);
      return { subscribed: false };
    },
  });

  table.register('sessions.describe', {
    scopes: [read],
    params: z.looseObject({ key: sessionKeyParam, agentId: agentIdParam.optional() }),
    async handler(params) {
      const { sessionKey, agentId } = resolveSessionKey(params.key, params.agentId);
      const summary = await services.sessions.describe({ sessionKey });
      return {
        key: sessionKey,
        session: summary ? sessionRow(summary, services.models.forAgent(agentId)) : null,
        defaults: sessionDefaults(services),
      };
    },
  });

  table.register('sessions.create', {
    scopes: [write],
    params: z.looseObject({
      key: sessionKeyParam.optional(),
      agentId: agentIdParam.optional(),
      label: z.string().min(1).max(200).optional(),
    }),
    async handler(params, context) {
      const agentId = params.agentId ?? defaultAgentId;
      // Without a key a client asks for a new session of its own: a fresh key under the agent.
      const raw = params.key ?? `agent:${agentId}:session-${randomUUID()}`;
      const { sessionKey, agentId: owner } = resolveSessionKey(raw, agentId);
      const { session, created } = await services.sessions.create({
        sessionKey,
        agentId: owner,
        ...(params.label !== undefined ? { label: params.label } : {}),
      });
      if (created) {
        context.sessionChanged({
          sessionKey,
          agentId: owner,
          reason: 'create',
          sessionId: session.sessionId,
        });
      }
      return {
        ok: true,
        key: sessionKey,
        sessionId: session.sessionId,
        entry: sessionRow(session, services.models.forAgent(owner)),
        created,
      };
    },
  });

  table.register('commands.list', {
    scopes: [read],
    params: z.looseObject({
      sessionKey: sessionKeyParam.optional(),
      agentId: agentIdParam.optional(),
      scope: z.enum(['text', 'native', 'both']).optional(),
      includeArgs: z.boolean().optional(),
    }),
    handler(params) {
      // agentd's commands are typed as text in a chat message; a client asking for native ones gets none.
      if (params.scope === 'native') return { commands: [] };
      return {
        commands: chatCommands.map((command) => ({
          name: command.name,
          textAliases: [`/${command.name}`],
          description: command.description,
          category: 'session',
          source: 'native',
          scope: 'text',
          acceptsArgs: false,
        })),
      };
    },
  });

  table.register('models.list', {
    scopes: [read],
    params: z.looseObject({}),
    handler() {
      return {
        models: services.models.list().map((model) => ({
          id: model.id,
          name: model.id,
          provider: model.provider,
          contextWindow: model.contextWindow,
          local: model.local,
          supportsTools: true,
          input: ['text'],
        })),
      };
    },
  });

  // agentd asks its clients nothing (tool approvals go to the ACP client that started the turn), has no
  // plugins and makes no task suggestions: these queues are empty by construction, not by omission.
  table.register('question.list', {
    scopes: [read],
    params: z.looseObject({}),
    handler: () => ({ questions: [] }),
  });
  table.register('plugin.approval.list', {
    scopes: [read],
    params: z.looseObject({}),
    handler: () => [],
  });
  table.register('taskSuggestions.list', {
    scopes: [read],
    params: z.looseObject({}),
    handler: () => ({ suggestions: [] }),
  });
}

/** agentd's work-item states as OpenClaw's task statuses (its `tasks.byStatus`). */
const taskStatusOf: Record<string, 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled'> = {
  queued: 'queued',
  blocked: 'queued',
  paused: 'queued',
  claimed: 'running',
  running: 'running',
  completed: 'succeeded',
  merged: 'succeeded',
  failed: 'failed',
  dead: 'failed',
  cancelled: 'cancelled',
};

function taskSummary(counts: Record<string, number> | undefined): Record<string, unknown> {
  const byStatus = { queued: 0, running: 0, succeeded: 0, failed: 0, timed_out: 0, cancelled: 0, lost: 0 };
  for (const [state, count] of Object.entries(counts ?? {})) {
    const status = taskStatusOf[state];
    if (status) byStatus[status] += count;
  }
  const total = Object.values(byStatus).reduce((sum, count) => sum + count, 0);
  const active = byStatus.queued + byStatus.running;
  return {
    total,
    active,
    terminal: total - active,
    failures: byStatus.failed,
    byStatus,
    // Work items are run by agentd's worker agents, OpenClaw's nearest runtime being sub-agents.
    byRuntime: { subagent: total, acp: 0, cli: 0, cron: 0 },
  };
}

/** How many sessions `status` lists per agent and overall. */
const recentSessionRows = 10;

/**
 * The `status` answer for OpenClaw clients: agentd's own status plus OpenClaw's summary fields
 * (`sessions.byAgent`, `tasks`, `heartbeat`, `channelSummary`) and, when asked, the `cliProjection` that
 * `openclaw status` reads. Every figure is agentd's: its sessions, its agents, its work queue.
 */
export async function statusWithOpenClawSummary(
  services: GatewayServices,
  params: { includeCliProjection?: boolean | undefined },
  nowMs: number,
): Promise<Record<string, unknown>> {
  const [own, sessions, workCounts] = await Promise.all([
    services.health.status(),
    services.sessions.list({ limit: 1000, includeArchived: false }),
    services.agents.workCounts(),
  ]);
  const agents = services.agents.list();
  const rowOf = (summary: SessionSummary) => {
    const model = services.models.forAgent(summary.agentId);
    return {
      agentId: summary.agentId,
      key: summary.key,
      kind: 'direct',
      sessionId: summary.sessionId,
      updatedAt: summary.updatedAt,
      age: Math.max(0, nowMs - summary.updatedAt),
      totalTokens: null,
      totalTokensFresh: false,
      remainingTokens: null,
      percentUsed: null,
      model: summary.model ?? `${model.provider}/${model.id}`,
      contextTokens: model.contextWindow,
      flags: [],
    };
  };
  const newestFirst = [...sessions].sort((a, b) => b.updatedAt - a.updatedAt);
  const agentIds = [...new Set([...agents.map((agent) => agent.id), ...sessions.map((s) => s.agentId)])];
  const defaultModel = services.models.forAgent(defaultAgentId);
  return {
    ...own,
    runtimeVersion: (own as { version?: unknown }).version ?? null,
    heartbeat: { defaultAgentId, agents: [] },
    channelSummary: [],
    queuedSystemEvents: [],
    degradedSecretOwners: [],
    tasks: taskSummary(workCounts),
    taskAudit: {
      total: 0,
      warnings: 0,
      errors: 0,
      byCode: {
        stale_queued: 0,
        stale_running: 0,
        lost: 0,
        delivery_failed: 0,
        missing_cleanup: 0,
        inconsistent_timestamps: 0,
      },
    },
    sessions: {
      // Sessions live in agentd's database, not in per-agent files.
      paths: [],
      count: sessions.length,
      defaults: {
        model: `${defaultModel.provider}/${defaultModel.id}`,
        contextTokens: defaultModel.contextWindow,
      },
      recent: newestFirst.slice(0, recentSessionRows).map(rowOf),
      byAgent: agentIds.map((agentId) => {
        const own = newestFirst.filter((summary) => summary.agentId === agentId);
        return {
          agentId,
          path: 'agentd database',
          count: own.length,
          recent: own.slice(0, recentSessionRows).map(rowOf),
        };
      }),
    },
    ...(params.includeCliProjection
      ? {
          cliProjection: {
            agents: {
              defaultId: defaultAgentId,
              selectionRequired: false,
              rows: agents.map((agent) => ({ id: agent.id, ...(agent.name ? { name: agent.name } : {}) })),
            },
            updateChannel: null,
            // agentd's memory is part of agentd, not a plugin slot.
            memoryPlugin: { enabled: false, slot: null, reason: 'agentd memory is built in' },
          },
        }
      : {}),
  };
}
