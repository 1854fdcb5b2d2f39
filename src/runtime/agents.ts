import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import {
  type AgentRuntime,
  agentRetentionConfigSchema,
  createAgentGatewayMethods,
  createAgentRuntime,
  createHeartbeat,
  createPlanner,
  createSendMessageTool,
  createSqlGoalClaims,
  createWorkerPool,
  type Heartbeat,
  heartbeatConfigSchema,
  type Planner,
  toAgentSpeech,
  toAgentStateUpdate,
  type WorkerPool,
} from '../agents/index.js';
import type { Bus } from '../bus/index.js';
import type { ChatService } from '../chat/index.js';
import type { AgentdConfig } from '../config/index.js';
import { type EngageOptions, type EngageResult, runEngage } from '../engage/index.js';
import { type MethodTable, OperatorScopes } from '../gateway/index.js';
import type { IdentityLoader } from '../identity/index.js';
import { type Ledger, ledgerEntryTypes } from '../ledger/index.js';
import type { MemoryManager, MemoryService } from '../memory/index.js';
import { toSpiderwebMemoryEvent } from '../memory/index.js';
import { commandPresets, type LanguageModel, type ModelMessage } from '../model/index.js';
import type { SkillLibrary } from '../skills/index.js';
import type { Store } from '../store/index.js';
import { createToolRegistry, type ToolDefinition, type ToolRegistry } from '../tools/index.js';
import type { Clock, IdGenerator, Logger } from '../util/index.js';
import { ErrorCodes, ProviderError, UserInputError } from '../util/index.js';
import {
  blockWorkItem,
  buildAwarenessDigest,
  createChildWorkTools,
  createReportBlockedTool,
  createWorkQueue,
  createWorkRetention,
  memoryMaintenanceKind,
  unblockWorkItem,
  type WorkConfig,
  type WorkItem,
  type WorkQueue,
  workClasses,
  workClassFilter,
  workConfigSchema,
  workStates,
  workSubmissionSchema,
} from '../work/index.js';
import { parseSection } from './config-section.js';
import { createWorkflowDispatch, type WorkflowDispatch, workflowRunKind } from './workflow-dispatch.js';

/** Ledger entries of earlier runs an item's next run starts with. */
const earlierLedgerEntries = 20;

/** The `workers:` section of agentd.yaml. */
export const workersConfigSchema = z
  .object({
    /** Work items (planned tasks, child work) running at once. */
    concurrency: z.number().int().min(1).default(4),
    /** Tasks that may wait for a worker; one more is refused with QUEUE_FULL. */
    admission_queue_size: z.number().int().min(1).default(64),
    /** Background maintenance (the memory manager) has its own slot so it never takes a chat worker. */
    background_concurrency: z.number().int().min(1).default(1),
    /** Workflow runs executing at once across all workflows (each workflow's scheduler.yaml bounds its own). */
    workflow_concurrency: z.number().int().min(1).default(4),
  })
  .prefault({});

export interface AgentsWiringOptions {
  config: AgentdConfig;
  bus: Bus;
  store: Store;
  memory: MemoryService;
  memoryManager: MemoryManager;
  identity: IdentityLoader;
  ledger: Ledger;
  /** Recently written skills, for the awareness digest's "Skills updated" section. */
  skills?: Pick<SkillLibrary, 'recentlyUpdated'>;
  tools: ToolRegistry;
  /** The queue and workflow dispatch, built first: services created before the agents submit to them. */
  work: WorkCore;
  /** Posts planner syntheses and heartbeat nudges to chat. */
  announce: ChatService['announce'];
  methods: MethodTable;
  /** The default model; agents with their own `model` get theirs from `modelFor`. */
  model: LanguageModel;
  modelFor(name: string): LanguageModel;
  /** Shared engage options (workspace, policy, hooks, limits) for runs started here. */
  engage: Omit<EngageOptions, 'model' | 'messages' | 'tools' | 'workItemId' | 'scope' | 'bus' | 'signal'>;
  workspaceDir: string;
  /** Agents whose user-led turn is running now (the heartbeat waits for them). */
  isUserTurnActive(agentId: string): boolean;
  clock: Clock;
  idGenerator: IdGenerator;
  logger: Logger;
}

/** The durable work queue and the workflow dispatch on it: no agent, planner or pool depends on them yet. */
export interface WorkCore {
  queue: WorkQueue;
  /** The parsed `work:` section (the queue keeps all of it but `awareness`). */
  config: WorkConfig;
  /** Runs workflow tasks as `workflow.run` work items; undefined when the pool is off. */
  workflowDispatch: WorkflowDispatch | undefined;
}

/**
 * The queue on its own, so that the services the agents use (skill experience proposing work, health
 * gauges, workflow methods) can take it directly instead of waiting for the agents to be wired.
 */
export function createWorkCore(options: {
  config: AgentdConfig;
  bus: Bus;
  store: Store;
  clock: Clock;
  idGenerator: IdGenerator;
}): WorkCore {
  const { config, bus, store, clock, idGenerator } = options;
  const workConfig = parseSection(workConfigSchema, config.sections.work, 'work');
  const queue = createWorkQueue({
    db: store.db,
    bus,
    clock,
    idGenerator,
    config: workConfig,
    ...(store.mode === 'postgres' && config.databaseUrl
      ? { listenConnectionString: config.databaseUrl }
      : {}),
  });
  return {
    queue,
    config: workConfig,
    workflowDispatch: config.features.workers_v1 ? createWorkflowDispatch(queue) : undefined,
  };
}

export interface AgentsWiring {
  queue: WorkQueue;
  /** Runs workflow tasks as `workflow.run` work items; undefined when the pool is off. */
  workflowDispatch: WorkflowDispatch | undefined;
  pool: WorkerPool | undefined;
  planner: Planner | undefined;
  heartbeat: Heartbeat | undefined;
  agents: AgentRuntime | undefined;
  /** `/goal` for the chat service. */
  goal(input: {
    argument: string;
    sessionKey: string;
    agentId: string;
    idempotencyKey?: string;
  }): Promise<string>;
  start(): Promise<void>;
  close(): Promise<void>;
}

function readChecklist(workspaceDir: string, agentId: string): string | undefined {
  for (const path of [
    join(workspaceDir, 'agents', agentId, 'HEARTBEAT.md'),
    join(workspaceDir, 'HEARTBEAT.md'),
  ]) {
    if (existsSync(path)) return readFileSync(path, 'utf8');
  }
  return undefined;
}

/**
 * Work and agents as one unit: the durable queue, the worker pool (chat and background classes), the
 * planner behind `/goal`, the heartbeat, the multi-agent runtime and their gateway methods. The feature
 * flags decide what runs: `workers_v1` the pool, `agent_runtime_v1` planner, heartbeat and agents.
 */
export function wireAgents(options: AgentsWiringOptions): AgentsWiring {
  const { config, bus, store, memory, identity, ledger, methods, clock, idGenerator, logger } = options;
  const { queue, config: workConfig, workflowDispatch } = options.work;
  const workersConfig = parseSection(workersConfigSchema, config.sections.workers, 'workers');
  const heartbeatConfig = parseSection(heartbeatConfigSchema, config.sections.heartbeat, 'heartbeat');
  const retentionConfig = parseSection(
    agentRetentionConfigSchema,
    config.sections.agent_runtime,
    'agent_runtime',
  );
  const features = config.features;

  const childTools = [
    ...createChildWorkTools({ queue, bus, ledger }),
    createReportBlockedTool({ queue, ledger }),
  ];
  let agentRuntime: AgentRuntime | undefined;
  // One registry while the tools stay the same: a registry converts each tool's schema to JSON Schema once,
  // and a new one per run redid that for every tool of every work item (about a millisecond a run).
  let cachedTools:
    | { tools: ToolDefinition[]; runtime: AgentRuntime | undefined; registry: ToolRegistry }
    | undefined;
  const workTools = (): ToolRegistry => {
    const tools = options.tools.list();
    if (
      cachedTools &&
      cachedTools.runtime === agentRuntime &&
      cachedTools.tools.length === tools.length &&
      cachedTools.tools.every((tool, index) => tool === tools[index])
    )
      return cachedTools.registry;
    const extra: ToolDefinition[] = [...childTools];
    if (agentRuntime) extra.push(createSendMessageTool(agentRuntime));
    cachedTools = { tools, runtime: agentRuntime, registry: createToolRegistry([...tools, ...extra]) };
    return cachedTools.registry;
  };

  const runEngageFor = (input: {
    agentId: string;
    model: LanguageModel;
    messages: ModelMessage[];
    workItemId: string;
    sessionKey?: string;
    signal: AbortSignal;
  }): Promise<EngageResult> =>
    runEngage({
      ...options.engage,
      model: input.model,
      messages: input.messages,
      tools: { registry: workTools() },
      workItemId: input.workItemId,
      scope: {
        runId: idGenerator('run'),
        agentId: input.agentId,
        ...(input.sessionKey ? { sessionKey: input.sessionKey } : {}),
      },
      bus,
      signal: input.signal,
    });

  /**
   * A run that picks up an item again (after a block, a retry or a restart) starts from the ledger of the
   * earlier runs, so an unblocked item reads why it stopped and the answer it got.
   */
  const earlierLedger = async (item: WorkItem): Promise<string> => {
    const entries = await ledger.read(item.id, { lastN: earlierLedgerEntries });
    if (entries.length === 0) return '';
    const lines = entries.map((entry) => {
      const text = entry.content.length > 500 ? `${entry.content.slice(0, 499)}…` : entry.content;
      return `[${entry.seq}] ${entry.entryType}: ${text}`;
    });
    return `\n\nYour ledger from earlier runs of this item (continue from it):\n${lines.join('\n')}`;
  };

  /** A work item runs as one engage run of its agent, told what its siblings are doing. */
  const runWorkItem = async (item: WorkItem, context: { signal: AbortSignal }) => {
    const agentId = item.agentId ?? 'main';
    const systemPrompt = await identity.systemPrompt(agentId);
    const digest = await buildAwarenessDigest({
      workItem: item,
      queue,
      ledger,
      now: clock.now(),
      lookbackMs: workConfig.awareness.lookbackMs,
      systemKinds: workConfig.systemKinds,
      ...(options.skills ? { skills: options.skills } : {}),
    });
    const params = Object.keys(item.params).length ? `\n\nParameters: ${JSON.stringify(item.params)}` : '';
    const earlier = await earlierLedger(item);
    const result = await runEngageFor({
      agentId,
      model: options.model,
      messages: [
        { role: 'system', content: digest ? `${systemPrompt}\n\n${digest}` : systemPrompt },
        { role: 'user', content: `Task: ${item.title}\n\n${item.description}${params}${earlier}`.trim() },
      ],
      workItemId: item.id,
      ...(item.sessionKey ? { sessionKey: item.sessionKey } : {}),
      signal: context.signal,
    });
    if (result.status === 'aborted')
      throw new UserInputError({ code: ErrorCodes.aborted, message: 'the task was aborted' });
    if (result.status === 'error') {
      throw new ProviderError({
        code: result.error?.code ?? ErrorCodes.providerError,
        message: result.error?.message ?? 'the model failed',
        retryable: result.error?.retryable ?? false,
      });
    }
    return { summary: result.text, status: result.status, turns: result.turns, usage: result.usage };
  };

  const pool = features.workers_v1
    ? createWorkerPool({
        queue,
        bus,
        logger,
        idGenerator,
        runItem: runWorkItem,
        classes: {
          chat: {
            concurrency: workersConfig.concurrency,
            admissionQueueSize: workersConfig.admission_queue_size,
          },
          background: {
            concurrency: workersConfig.background_concurrency,
            admissionQueueSize: 4,
            kinds: [memoryMaintenanceKind],
            runItem: async () => ({ summary: JSON.stringify(await options.memoryManager.tick()) }),
          },
          workflow: {
            concurrency: workersConfig.workflow_concurrency,
            admissionQueueSize: workersConfig.admission_queue_size,
            kinds: [workflowRunKind],
            runItem: (item, context) => workflowDispatch!.runItem(item, context),
          },
        },
      })
    : undefined;

  // A keyed goal retried on another process of the database while this one plans it waits for this one.
  const goalClaims = features.agent_runtime_v1 ? createSqlGoalClaims({ db: store.db, logger }) : undefined;
  const planner = features.agent_runtime_v1
    ? createPlanner({
        model: options.model,
        queue,
        bus,
        ...(goalClaims ? { claims: goalClaims } : {}),
        idGenerator,
        logger,
        ...(pool ? { submitTask: (submission) => pool.submit(submission) } : {}),
        memoryWriter: async (write) => {
          const session = await store.sessions.ensureActive(write.sessionKey, write.agentId);
          return memory.append(
            { sessionId: session.id, sessionKey: write.sessionKey, agentId: write.agentId },
            { role: 'system', content: write.content },
          );
        },
        onSynthesis: (synthesis) => {
          void options.announce({
            sessionKey: synthesis.sessionKey,
            agentId: synthesis.agentId,
            text: synthesis.text,
            label: 'synthesis',
          });
        },
      })
    : undefined;

  const modelOfAgent = (model: string | undefined): LanguageModel =>
    model ? options.modelFor(model.includes('/') ? model : `command/${model}`) : options.model;

  if (features.agent_runtime_v1) {
    agentRuntime = createAgentRuntime({
      db: store.db,
      bus,
      clock,
      idGenerator,
      logger,
      defaultModel: `${options.model.provider}/${options.model.modelId}`,
      retainStateHistoryRows: retentionConfig.retainStateHistoryRows,
      retainConversationRows: retentionConfig.retainConversationRows,
      retainTaskRows: retentionConfig.retainTaskRows,
      checkModel: (model) => {
        const name = model.includes('/') ? model : `command/${model}`;
        if (name.startsWith('command/') && !Object.hasOwn(commandPresets, name.slice('command/'.length))) {
          throw new UserInputError({
            code: ErrorCodes.unknownBackend,
            message: `unknown CLI backend '${name.slice('command/'.length)}'; known: ${Object.keys(commandPresets).join(', ')}.`,
          });
        }
        // Resolving checks the provider and its credentials now rather than at the agent's first turn.
        options.modelFor(name);
      },
      decideWithModel: async (agent, prompt, signal) => {
        const result = await runEngageFor({
          agentId: agent.id,
          model: modelOfAgent(agent.model),
          messages: [{ role: 'user', content: prompt }],
          workItemId: `agent:${agent.id}:decision`,
          signal,
        });
        return result.text;
      },
      runTurn: async (agent, message, signal) => {
        const packet = await identity.load(agent.id).catch(() => identity.load('main'));
        const system = [
          packet.systemPrompt,
          agent.role ? `Your role: ${agent.role}` : '',
          agent.systemPrompt ?? '',
          agent.initialContext ?? '',
        ]
          .filter(Boolean)
          .join('\n\n');
        const from =
          message.kind === 'broadcast'
            ? `Broadcast from ${message.from}`
            : message.kind === 'task'
              ? 'Task'
              : `Message from ${message.from}`;
        const model = modelOfAgent(agent.model);
        const result = await runEngageFor({
          agentId: agent.id,
          model,
          messages: [
            { role: 'system', content: system },
            { role: 'user', content: `${from}: ${message.content}` },
          ],
          workItemId: `agent:${agent.id}:${message.taskId ?? 'mailbox'}`,
          signal,
        });
        if (result.status === 'error')
          throw new ProviderError({
            code: result.error?.code ?? ErrorCodes.providerError,
            message: result.error?.message ?? 'the model failed',
          });
        return result.text;
      },
    });
  }

  const heartbeat = features.agent_runtime_v1
    ? createHeartbeat({
        queue,
        bus,
        clock,
        logger,
        config: heartbeatConfig,
        systemKinds: workConfig.systemKinds,
        agents: () => [
          ...new Set([
            'main',
            ...config.agents.map((agent) => agent.id),
            ...(agentRuntime?.listStates().map((agent) => agent.id) ?? []),
          ]),
        ],
        model: options.model,
        heartbeatChecklist: (agentId) => readChecklist(options.workspaceDir, agentId),
        isUserTurnActive: options.isUserTurnActive,
        onNudge: (agentId, message) => {
          // An isolated session: heartbeat nudges never flood the main conversation.
          void options.announce({
            sessionKey: `agent:${agentId}:heartbeat`,
            agentId,
            text: message,
            label: 'heartbeat',
          });
        },
      })
    : undefined;

  // Gateway: agents.*, agent.broadcast, agent.control, work.*; and the events clients can follow.
  const { read, write, admin } = OperatorScopes;
  if (agentRuntime) {
    const handlers = createAgentGatewayMethods({
      runtime: agentRuntime,
      ...(planner ? { planner } : {}),
      ...(pool ? { pool } : {}),
      ...(heartbeat ? { heartbeat } : {}),
    });
    const scopesOf: Record<string, string[]> = {
      'agents.spawn': [admin],
      'agents.terminate': [admin],
      'agents.list': [read],
      'agents.state': [read],
      'agent.broadcast': [write],
      'agents.message': [write],
      'agents.assign': [write],
      'agents.move': [write],
      'agents.conversation': [read],
      'agents.history': [read],
      'agent.control': [write],
    };
    for (const [name, method] of Object.entries(handlers)) {
      methods.register(name, {
        scopes: scopesOf[name] ?? [admin],
        params: z.unknown(),
        handler: (params, context) => method.handler(params, context),
      });
    }
    const runtimeRef = agentRuntime;
    methods.forwardBusEvent('agent:state', 'agent.state_update', {
      toPayload: (event) => {
        const { data } = event;
        try {
          return toAgentStateUpdate(runtimeRef.getState(data.agentId));
        } catch {
          return {
            type: 'agent_state_update',
            agent_id: data.agentId,
            state: data.to,
          };
        }
      },
    });
    methods.forwardBusEvent('agent:spoke', 'agent.speech', {
      toPayload: (event) => toAgentSpeech(event.data),
    });
    methods.forwardBusEvent('agent:broadcast', 'agent.broadcast');
    methods.forwardBusEvent('agent:moved', 'agent.moved', {
      toPayload: (event) => {
        const { data } = event;
        return {
          type: 'agent_moved',
          agent_id: data.agentId,
          agentId: data.agentId,
          position: data.to,
          from: data.from,
          ...(data.reason ? { reason: data.reason } : {}),
          ts: event.at,
        };
      },
    });
    methods.forwardBusEvent('agent:spawned', 'agent.spawned');
    methods.forwardBusEvent('agent:terminated', 'agent.terminated');
  }
  // Failures operators and clients must hear about (explicit error events, e.g. RAM-only mode).
  methods.forwardBusEvent('system:error', 'system.error');
  methods.forwardBusEvent('agent:plan', 'agent.plan', { spiderweb: 'legacy' });
  // The runtime's own upkeep (memory maintenance every interval) is no news for chat clients: its effects,
  // when there are any, arrive as their own events (memory.event).
  methods.forwardBusEvent('agent:progress', 'agent.progress', {
    spiderweb: 'legacy',
    include: (event) => event.data.systemWork !== true,
  });
  methods.forwardBusEvent('agent:status', 'agent.status', { spiderweb: 'legacy' });
  methods.forwardBusEvent('agent:synthesis', 'agent.synthesis');
  methods.forwardBusEvent('agent:heartbeat', 'agent.heartbeat');
  methods.forwardBusEvent('agent:blocked', 'agent.blocked');
  methods.forwardBusEvent('memory:event', 'memory.event', {
    spiderweb: 'legacy',
    toPayload: (event) => toSpiderwebMemoryEvent(event.data, null) as Record<string, unknown>,
  });

  methods.register('work.submit', {
    scopes: [write],
    params: workSubmissionSchema,
    handler: (params) => (pool ? pool.submit(params) : queue.submit(params)),
  });
  methods.register('work.list', {
    scopes: [read],
    params: z.object({
      /** One state or a comma-separated list. */
      state: z
        .string()
        .transform((value) => value.split(',').map((state) => state.trim()))
        .pipe(z.array(z.enum(workStates)).min(1))
        .optional(),
      kind: z.string().optional(),
      parentId: z.string().optional(),
      agentId: z.string().optional(),
      sessionKey: z.string().optional(),
      /** `user` (default) hides system work such as memory maintenance; `system` shows only it. */
      class: z.enum(workClasses).default('user'),
      limit: z.number().int().min(1).max(1000).default(100),
    }),
    handler: async ({ class: workClass, state, ...params }) => ({
      items: await queue.list({
        ...params,
        ...(state ? { states: state } : {}),
        ...workClassFilter(workClass, workConfig.systemKinds),
      }),
    }),
  });
  methods.register('work.get', {
    scopes: [read],
    params: z.object({
      id: z.string().min(1).max(256),
      // A ledger grows with every run of the item: one answer holds its newest entries, not all of them.
      ledgerLast: z.number().int().min(1).max(10_000).default(1_000),
    }),
    handler: async ({ id, ledgerLast }) => {
      const item = await queue.get(id);
      if (!item) throw new UserInputError({ code: ErrorCodes.notFound, message: `no work item ${id}` });
      return { item, ledger: await ledger.read(id, { lastN: ledgerLast }) };
    },
  });
  methods.register('ledger.read', {
    scopes: [read],
    params: z.object({
      id: z.string().min(1).max(256),
      entryType: z.enum(ledgerEntryTypes).optional(),
      lastN: z.number().int().min(1).max(10_000).default(1_000),
    }),
    // A chat session's ledger (`session:<session id>`) has no work item, and a pruned item's ledger outlives it.
    handler: async ({ id, entryType, lastN }) => {
      const entries = await ledger.read(id, { lastN, ...(entryType ? { entryType } : {}) });
      const known =
        entries.length > 0 ||
        (await queue.get(id)) !== undefined ||
        (entryType !== undefined && (await ledger.read(id, { lastN: 1 })).length > 0);
      if (!known)
        throw new UserInputError({
          code: ErrorCodes.notFound,
          message: `no work item or ledger named ${id}`,
        });
      return { workItemId: id, entries };
    },
  });
  methods.register('work.block', {
    scopes: [write],
    params: z.object({
      id: z.string().min(1),
      reason: z.string().trim().min(1).max(2_000),
      needs: z.string().trim().min(1).max(2_000).optional(),
    }),
    handler: async ({ id, reason, needs }) => ({
      item: await blockWorkItem(queue, ledger, id, { reason, ...(needs ? { needs } : {}) }),
    }),
  });
  methods.register('work.unblock', {
    scopes: [write],
    params: z.object({ id: z.string().min(1), note: z.string().trim().min(1).max(20_000).optional() }),
    handler: async ({ id, note }) => ({
      item: await unblockWorkItem(queue, ledger, id, note ? { note } : {}),
    }),
  });
  methods.register('work.cancel', {
    scopes: [write],
    params: z.object({ id: z.string().min(1) }),
    handler: async ({ id }) => ({
      cancelled: pool ? await pool.cancel({ ids: [id] }) : [await queue.cancel(id)],
    }),
  });

  let maintenanceTimer: NodeJS.Timeout | undefined;
  const workRetention = createWorkRetention({ queue, clock, logger });

  return {
    queue,
    workflowDispatch,
    pool,
    planner,
    heartbeat,
    agents: agentRuntime,
    async goal({ argument, sessionKey, agentId, idempotencyKey }) {
      if (!planner) return 'Planning is off (features.agent_runtime_v1 is false).';
      if (!argument) return 'Usage: /goal <what you want done>';
      const plan = await planner.plan({
        goal: argument,
        sessionKey,
        agentId,
        ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
      });
      const lines = [
        plan.reply,
        '',
        ...plan.tasks.map((task, index) => `${index + 1}. ${task.title} (${task.workItemId})`),
      ];
      for (const rejected of plan.rejected)
        lines.push(`✗ ${rejected.title}: ${rejected.message} (${rejected.code})`);
      return lines.join('\n').trim();
    },
    async start() {
      workRetention.start();
      if (agentRuntime) {
        const running = await agentRuntime.start();
        for (const definition of config.agents) {
          if (running.some((agent) => agent.id === definition.id)) continue;
          await agentRuntime.spawn({
            id: definition.id,
            name: definition.name ?? definition.id,
            role: definition.role ?? '',
            ...(definition.model ? { model: definition.model } : {}),
          });
        }
      }
      pool?.start();
      heartbeat?.start();
      if (config.features.memory_v1) {
        if (pool) {
          // The memory manager runs through the pool's background class on its own schedule.
          const submitMaintenance = () => {
            pool
              .submit({
                kind: memoryMaintenanceKind,
                title: 'memory maintenance',
                agentId: 'system',
                dedupKey: memoryMaintenanceKind,
                maxAttempts: 1,
              })
              .catch((error: unknown) =>
                logger.debug({ err: error }, 'memory maintenance not admitted this time'),
              );
          };
          maintenanceTimer = setInterval(submitMaintenance, memory.config.managerIntervalMs);
          maintenanceTimer.unref();
        } else {
          options.memoryManager.start();
        }
      }
    },
    async close() {
      if (maintenanceTimer) clearInterval(maintenanceTimer);
      await heartbeat?.stop();
      await pool?.stop();
      await agentRuntime?.close();
      await goalClaims?.close();
      await workRetention.stop();
      await queue.close();
    },
  };
}
