/**
 * The composition root: the one place that wires the subsystems into a running agentd. Everything else
 * receives its collaborators through factory options.
 */

import { dirname, join, resolve } from 'node:path';
import { type Bus, createBus } from './bus/index.js';
import { type ChatService, chatConfigSchema, createChatService, type PendingMessage } from './chat/index.js';
import { type AgentDefinition, type AgentdConfig, providerSettings } from './config/index.js';
import { createCronScheduler } from './cron/index.js';
import { type EngageResult, engageConfigSchema, engageOptionsFromConfig, runEngage } from './engage/index.js';
import {
  createMethodTable,
  type GatewayServer,
  type GatewayServices,
  gatewayConfigSchema,
  loadGatewayServer,
  type MethodTable,
  registerCoreMethods,
} from './gateway/index.js';
import { createIdentityLoader, type IdentityLoader } from './identity/index.js';
import { createLedger, type Ledger } from './ledger/index.js';
import { createMcpClientManager, type McpClientManager, mcpConfigSchema, mcpSecrets } from './mcp/index.js';
import {
  createMemoryAccess,
  createMemoryManager,
  createMemoryService,
  type MemoryManager,
  type MemoryService,
  memoryConfigSchema,
} from './memory/index.js';
import { contextWindowFor, defaultModelName, type LanguageModel, resolveModel } from './model/index.js';
import { type AgentsWiring, createWorkCore, wireAgents } from './runtime/agents.js';
import { createAnnouncePort } from './runtime/announce-port.js';
import { parseSection } from './runtime/config-section.js';
import { registerCronMethods } from './runtime/cron-methods.js';
import {
  createGatewayServices,
  createModelCatalog,
  createStoredDevicePairings,
} from './runtime/gateway-services.js';
import {
  createHealthSampler,
  type HealthSampler,
  registerHealthSamplesMethod,
} from './runtime/health-samples.js';
import { registerOpsMethods } from './runtime/ops-methods.js';
import { registerSkillMethods } from './runtime/skill-methods.js';
import { withCredentialOverride } from './runtime/standalone.js';
import { prepareStateDir, type StateDir } from './runtime/state-dir.js';
import { prepareToolSafety } from './runtime/tool-safety.js';
import { createWorkflowAgentRunner } from './runtime/workflow-agent.js';
import { registerWorkflowMethods, workflowsConfigSchema } from './runtime/workflow-methods.js';
import { recordWorkflowMetrics } from './runtime/workflow-metrics.js';
import { registerWorkflowViewMethods } from './runtime/workflow-view-methods.js';
import {
  createExecuteCodeTool,
  createSandboxPool,
  type SandboxPool,
  sandboxConfigSchema,
} from './sandbox/index.js';
import {
  createSkillActivationRetention,
  createSkillExperience,
  createSkillLibrary,
  createSkillTools,
  type SkillExperience,
  type SkillLibrary,
  skillsConfigSchema,
} from './skills/index.js';
import {
  auditConfigSchema,
  createChatOwnerLease,
  createEventRecorder,
  createEventRetention,
  createStore,
  type EventRecorder,
  type Store,
} from './store/index.js';
import {
  createLogger,
  createLogRing,
  createMetricsRegistry,
  createRedactor,
  createSloMetrics,
  type MetricsRegistry,
  type Redactor,
  startTelemetry,
  type TelemetryHandle,
} from './telemetry/index.js';
import {
  createBuiltinTools,
  createHookPipeline,
  createPolicy,
  createToolRegistry,
  type HookPipeline,
  loadToolModules,
  type Policy,
  policyConfigSchema,
  type ToolApprover,
  type ToolDefinition,
  type ToolRegistry,
  toolModuleNameTaken,
  toolsConfigSchema,
} from './tools/index.js';
import type { Logger } from './util/index.js';
import {
  type Clock,
  closeOwner,
  createIdGenerator,
  ErrorCodes,
  type IdGenerator,
  isStoreUnavailable,
  once,
  openOwner,
  packageRoot,
  packageVersion,
  systemClock,
  UserInputError,
} from './util/index.js';
import { createInterruptedRunSweep, createRunOwner, createWorkflowRetention } from './workflow/index.js';

// The composition root's helpers that the CLI uses on its own (`agentd mcp`, workflow commands);
// runtime.ts is the one entry to src/runtime/ for other folders.
export { parseSection } from './runtime/config-section.js';
export { serveAgentdMcpStdio, startAgentdMcpHttpServer } from './runtime/mcp-server.js';
export {
  checkMcpServers,
  createStandaloneWorkflowRunner,
  openStandaloneSkills,
  openStandaloneWork,
  resolveStandaloneModel,
  type StandaloneSkills,
  type StandaloneWork,
} from './runtime/standalone.js';
export { createWorkflowAgentRunner } from './runtime/workflow-agent.js';

/**
 * Options of `createRuntime`: the config plus what a program adds or overrides (model, tools, agents, collaborators).
 */
export interface CreateRuntimeOptions {
  /** The effective configuration, from `loadConfig` (an empty directory gives the defaults). */
  config: AgentdConfig;
  /** Overrides the configured model (tests pass a scripted model). */
  model?: LanguageModel;
  /**
   * Extra tools (from `defineTool`), registered after the built-in ones and the `tools.modules` of the
   * config, under the same policy, hooks and limits. A name already taken is a CONFLICT error.
   */
  tools?: readonly ToolDefinition[];
  /** Extra agents (from `defineAgent`), added to the config's `agents:`; an id defined twice is a CONFLICT. */
  agents?: readonly AgentDefinition[];
  logger?: Logger;
  /** Where log lines go when no logger is given (default stderr). */
  logDestination?: NodeJS.WritableStream;
  env?: NodeJS.ProcessEnv;
  clock?: Clock;
  idGenerator?: IdGenerator;
  fetch?: typeof globalThis.fetch;
}

/** What `runWorkflow` returns: the task id and, once the run ended, its outcome. */
export interface RuntimeWorkflowRun {
  taskId: string;
  result: unknown;
}

/**
 * A running agentd: its subsystems, in-process chat, goals and workflows, and the gateway on demand.
 * `close()` it when done.
 */
export interface Runtime {
  readonly version: string;
  readonly config: AgentdConfig;
  readonly state: StateDir;
  readonly logger: Logger;
  readonly redactor: Redactor;
  readonly bus: Bus;
  readonly store: Store;
  readonly model: LanguageModel;
  readonly modelName: string;
  readonly memory: MemoryService;
  readonly memoryManager: MemoryManager;
  readonly identity: IdentityLoader;
  readonly ledger: Ledger;
  readonly skills: SkillLibrary;
  /** Skills from experience: recurring ledger findings become skill proposals. */
  readonly skillExperience: SkillExperience;
  readonly tools: ToolRegistry;
  /** Clients of the MCP servers in agentd.yaml; their tools are in `tools` while connected. */
  readonly mcp: McpClientManager;
  readonly policy: Policy;
  /**
   * Who approves the `ask` policy decisions of chat turns in a session (an editor connected over ACP).
   * Returns the unregister function. Turns of a session with no approver refuse ask-first calls.
   */
  registerApprover(sessionKey: string, approver: ToolApprover): () => void;
  readonly chat: ChatService;
  readonly methods: MethodTable;
  readonly services: GatewayServices;
  readonly metrics: MetricsRegistry;
  /** The last hour of health samples (the dashboard's charts). */
  readonly healthSamples: HealthSampler;
  /** Queue, worker pool, planner, heartbeat and the multi-agent runtime. */
  readonly work: AgentsWiring;
  /** Starts the worker pool, heartbeat, agents and memory maintenance (startGateway does it too). */
  startBackground(): Promise<void>;
  /**
   * Ends what the last process on this state directory left of the chat, as `startGateway` does once it
   * listens: runs a crash cut off end with `RUN_INTERRUPTED` (an error final and a note in the transcript),
   * the keys of the runs of the last 10 minutes are read back (a message sent again under one is answered with
   * how its run ended), and the messages accepted but not yet answered start. Returns the ids of those runs.
   * The runs and messages of another process on the same database are left to it while it lives (this
   * host's) or its lease holds (another host's), and taken by a sweep once that lease lapsed
   * (docs/storage.md). Later calls return the first's promise.
   */
  resumeChat(): Promise<string[]>;
  /** Starts background work (memory manager) and the gateway, then `resumeChat`. */
  startGateway(options?: {
    host?: string;
    port?: number;
    noAuth?: boolean;
  }): Promise<{ url: string; server: GatewayServer }>;
  /** One chat turn in-process: what `agentd send` does without `--url`. */
  sendMessage(input: { text: string; agentId?: string; sessionKey?: string; timeoutMs?: number }): Promise<{
    runId: string;
    status: string;
    text: string;
    sessionKey: string;
    error?: { code: string; message: string };
  }>;
  /**
   * `/goal` without a chat: the planner turns the goal into work items for the agent, which the worker pool
   * runs in the background (after `startBackground`). Returns the plan as text. `idempotencyKey` names the goal
   * in its session: sent again, it answers the plan already made (docs/agents.md, "Idempotency keys").
   */
  goal(input: {
    text: string;
    agentId?: string;
    sessionKey?: string;
    idempotencyKey?: string;
  }): Promise<string>;
  /**
   * Runs the workflow in `dir` (a directory with workflow.yaml) with `input`, and waits for the run to end.
   * The program's own directories are trusted; with `confined` (a request relayed from a client) only
   * directories under `workflows.dirs` are accepted, as for the gateway's `workflow.run`.
   */
  runWorkflow(input: { dir: string; input?: unknown; confined?: boolean }): Promise<RuntimeWorkflowRun>;
  health(): Record<string, unknown>;
  /**
   * Loads what a first chat turn needs that making the runtime did not (the skills' list, the tools'
   * definitions for the model, the model provider's SDK), so that turn does not wait for it. A process that
   * waits for its first message calls it (`serve`, `chat`, `acp` and `mcp serve` do); calls after the first
   * return the first's promise. Never rejects: a part that fails is logged, and the turn that needs it meets
   * the failure itself.
   */
  prepare(): Promise<void>;
  /** Graceful stop: no new connections, running turns aborted and persisted, database closed. */
  close(): Promise<void>;
}

/**
 * A changed identity file the loader's watchers cannot report (its folders cannot be watched, or it is a
 * symbolic link) is seen within this time; one they can report is seen at once, and at a person's pace a turn
 * then stats no files (decision 0050).
 */
const identityRevalidateMs = 1_000;
/**
 * Audit-log events gather this long into one commit (tens of chat turns' worth): each commit writes every
 * index of the events table once, and no client waits for these rows. The batch runs on the event loop, so
 * its length is a pause for the turn that arrives meanwhile: 100 ms of one client's turns took 1.2 ms
 * (docs/storage.md).
 */
const auditBatchDelayMs = 20;
const dayMs = 24 * 60 * 60 * 1000;

/**
 * Builds a runtime from a config: opens the store (SQLite, Postgres or RAM), resolves the model,
 * registers the built-in, `tools.modules`, MCP and given tools, and wires memory, agents and workflows.
 * Background work and the gateway start only when asked (`startBackground`, `startGateway`).
 */
export async function createRuntime(options: CreateRuntimeOptions): Promise<Runtime> {
  const config = withExtraAgents(options.config, options.agents ?? []);
  const env = options.env ?? process.env;
  const clock = options.clock ?? systemClock;
  const idGenerator = options.idGenerator ?? createIdGenerator();
  const version = packageVersion();
  const startedAt = clock.now();

  const memoryConfig = parseSection(memoryConfigSchema, config.sections.memory, 'memory');
  const chatConfig = parseSection(chatConfigSchema, config.sections.chat, 'chat');
  const engageConfig = parseSection(engageConfigSchema, config.sections.engage, 'engage');
  const gatewayConfig = parseSection(gatewayConfigSchema, config.sections.gateway, 'gateway');
  const toolsConfig = parseSection(toolsConfigSchema, config.sections.tools, 'tools');
  const skillsConfig = parseSection(skillsConfigSchema, config.sections.skills, 'skills');
  const policyConfig = parseSection(policyConfigSchema, config.sections.policy, 'policy');
  const mcpConfig = parseSection(mcpConfigSchema, config.sections.mcp, 'mcp');
  const sandboxConfig = parseSection(sandboxConfigSchema, config.sections.sandbox, 'sandbox');
  const auditConfig = parseSection(auditConfigSchema, config.sections.audit, 'audit');
  // Custom tool modules are imported before anything is opened, so a broken module fails start-up cleanly.
  const moduleTools = await loadToolModules({
    modules: toolsConfig.modules,
    baseDir: config.configPath ? dirname(config.configPath) : process.cwd(),
    reservedNames: (options.tools ?? []).map((tool) => tool.name),
  });

  const state = prepareStateDir(config.home, config.token);
  const redactor = createRedactor([
    ...config.secrets,
    ...mcpSecrets(mcpConfig).filter((secret) => secret.length >= 4),
    state.token,
  ]);
  // The last lines the logger wrote (redacted), for `logs.tail`; empty when the caller brings its own logger.
  const logRing = createLogRing();
  const logger =
    options.logger ??
    createLogger({
      level: config.logLevel,
      redactor,
      ring: logRing,
      ...(options.logDestination ? { destination: options.logDestination } : {}),
    });
  for (const warning of config.warnings) logger.warn({ component: 'config' }, warning);
  // Before anything is opened: a hook directory inside the workspace is refused outright.
  const toolSafety = prepareToolSafety({
    tools: toolsConfig,
    home: state.home,
    workspaceDir: state.workspaceDir,
    configPath: config.configPath,
    logger,
  });
  const telemetry: TelemetryHandle = await startTelemetry({ env, logger, serviceVersion: version });

  const bus = createBus({ clock, logger, sanitize: (data) => redactor.redactValue(data) });
  const store = await createStore({
    stateDir: state.home,
    ...(config.databaseUrl ? { databaseUrl: config.databaseUrl } : {}),
    logger,
    bus,
    clock,
    idGenerator,
  });
  const recorder: EventRecorder = createEventRecorder({
    bus,
    events: store.events,
    logger,
    batchDelayMs: auditBatchDelayMs,
  });
  const auditRetention = createEventRetention({
    events: store.events,
    retainMs: auditConfig.retainDays * dayMs,
    clock,
    logger,
  });
  auditRetention.start();

  const credentials = providerSettings(config.credentials);
  const modelName = options.model
    ? `${options.model.provider}/${options.model.modelId}`
    : (config.model ?? defaultModelName(env, credentials));
  const model =
    options.model ??
    resolveModel(modelName, { env, credentials, logger, ...(options.fetch ? { fetch: options.fetch } : {}) });

  const memory = createMemoryService({
    db: store.db,
    bus,
    model,
    clock,
    idGenerator,
    logger,
    config: memoryConfig,
    env,
  });
  const memoryManager = createMemoryManager({
    memory,
    clock,
    logger,
    onError: (code) => slo.recordError('memory_manager', code),
  });
  // Identity files are checked at most once a second, not on every chat turn.
  const identity = createIdentityLoader({
    workspaceDir: state.workspaceDir,
    logger,
    revalidateMs: identityRevalidateMs,
    watch: true,
    clock,
  });
  const ledger = createLedger({ db: store.db, bus, clock });
  const skills = createSkillLibrary({
    dirs: [`${state.workspaceDir}/skills`],
    db: store.db,
    ledger,
    bus,
    clock,
    logger,
  });
  const skillActivationRetention = createSkillActivationRetention({
    db: store.db,
    retainMs: skillsConfig.retainActivationsDays * dayMs,
    clock,
    logger,
  });
  // The queue comes before everything that submits to it or counts it (skill experience, health, gateway).
  const workCore = createWorkCore({ config, bus, store, clock, idGenerator });
  const skillExperience = createSkillExperience({
    db: store.db,
    ledger,
    library: skills,
    config: skillsConfig.experience,
    proposeWork: (work) => workCore.queue.submit({ ...work, source: 'skills' }),
    bus,
    clock,
    idGenerator,
    logger,
  });
  const baseTools = [
    ...createBuiltinTools({
      ledger,
      memory: createMemoryAccess(memory),
      files: { grepTimeoutMs: toolsConfig.grep.timeout_ms, protectedPaths: toolSafety.protectedPaths },
      bash: {
        enabled: toolsConfig.bash.enabled,
        isolation: toolSafety.isolation,
        env: toolsConfig.child_env,
        timeoutMs: toolsConfig.bash.timeout_ms,
        maxOutputBytes: toolsConfig.bash.max_output_bytes,
      },
      httpFetch: {
        enabled: toolsConfig.http_fetch.enabled,
        allowedHosts: toolsConfig.http_fetch.allowed_hosts,
        timeoutMs: toolsConfig.http_fetch.timeout_ms,
        maxResponseBytes: toolsConfig.http_fetch.max_response_bytes,
      },
    }),
    ...createSkillTools({ library: skills, ledger, experience: skillExperience }),
  ];
  const takenByBuiltin = moduleTools.find((entry) => baseTools.some((tool) => tool.name === entry.tool.name));
  if (takenByBuiltin) {
    await workCore.queue.close();
    await auditRetention.stop();
    await recorder.stop();
    await store.close();
    await telemetry.shutdown();
    throw toolModuleNameTaken(takenByBuiltin);
  }
  const tools = createToolRegistry(
    [...baseTools, ...moduleTools.map((entry) => entry.tool), ...(options.tools ?? [])],
    { redactText: redactor.redactText },
  );
  // Workers start at the first execution (or now, for `prewarm` languages), never per call.
  const sandbox: SandboxPool | undefined = sandboxConfig.enabled
    ? createSandboxPool({
        maxWorkers: sandboxConfig.workers,
        memoryLimitBytes: sandboxConfig.memory_mib * 2 ** 20,
        maxStackBytes: sandboxConfig.max_stack_kib * 1024,
        recursionLimit: sandboxConfig.python_recursion_limit,
        startTimeoutMs: sandboxConfig.start_timeout_ms,
        logger,
      })
    : undefined;
  if (sandbox) {
    tools.register(createExecuteCodeTool({ pool: sandbox, config: sandboxConfig, clock, idGenerator }));
    for (const language of sandboxConfig.prewarm) {
      sandbox
        .warm(language)
        .catch((error: unknown) =>
          logger.warn({ component: 'sandbox', err: error, language }, 'sandbox prewarm failed'),
        );
    }
  }
  const policy: Policy = createPolicy(policyConfig);
  const mcp = createMcpClientManager({
    config: mcpConfig,
    registry: tools,
    bus,
    logger,
    env,
    ...(config.configPath ? { cwd: dirname(config.configPath) } : {}),
    clientVersion: version,
  });
  // Tools of the servers that answer are there for the first turn; the others keep retrying in the background.
  await mcp.start();
  const hooks: HookPipeline = createHookPipeline({
    hooksDir: toolSafety.hooksDir,
    workingDir: state.workspaceDir,
    isolation: toolSafety.isolation,
    env: toolsConfig.child_env,
    failMode: toolsConfig.hooks.fail_mode,
    timeoutMs: toolsConfig.hooks.timeout_ms,
    logger,
  });
  const engageDefaults = engageOptionsFromConfig(engageConfig);
  const approvers = new Map<string, ToolApprover>();

  const metrics = createMetricsRegistry();
  // agentd's SLOs: OpenTelemetry instruments (exported when OTEL_* started an SDK above) and /metrics.
  const slo = createSloMetrics({ registry: metrics });
  const turnsTotal = metrics.counter('agentd_turns_total', 'Chat runs by final status');
  const errorsTotal = metrics.counter('agentd_errors_total', 'Errors by component');
  const workEvents = metrics.counter('agentd_work_events_total', 'Work item lifecycle events by type');
  bus.on('run:finished', (event) => turnsTotal.inc({ status: event.data.status }));
  bus.subscribe({ types: ['work:*'] }, (event) => workEvents.inc({ type: event.type }));
  bus.on('system:error', (event) => errorsTotal.inc({ component: event.data.component }));
  bus.on('system:error', (event) =>
    slo.recordError('system', event.data.code, { 'agentd.component': event.data.component }),
  );
  const workFailed = (data: { kind: string; error: { code: string }; remote?: boolean }) => {
    // A failure in another process is counted there.
    if (!data.remote) slo.recordError('work', data.error.code, { 'agentd.work_item.kind': data.kind });
  };
  bus.on('work:failed', (event) => workFailed(event.data));
  bus.on('work:dead', (event) => workFailed(event.data));
  bus.on('workflow:task-failed', (event) => {
    const { taskId, rootTaskId, payload } = event.data;
    const error = payload.error as { code?: unknown } | undefined;
    if (taskId === rootTaskId)
      slo.recordError('workflow', typeof error?.code === 'string' ? error.code : 'failed');
  });
  recordWorkflowMetrics(bus, metrics);

  const workflowModel = (name: string, credential?: { apiKey: string; baseUrl?: string }): LanguageModel =>
    resolveModel(name, {
      env,
      credentials: withCredentialOverride(credentials, name, credential),
      logger,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
  const methods = createMethodTable();
  const userTurns = new Map<string, number>();
  // Agents come before chat, whose `/goal` is the planner's; what they announce reaches chat through this
  // port, bound right after the chat service is created (nothing announces before `startBackground`).
  const announcements = createAnnouncePort();
  const agents = wireAgents({
    config,
    bus,
    store,
    skills,
    memory,
    memoryManager,
    identity,
    ledger,
    tools,
    work: workCore,
    announce: announcements.announce,
    methods,
    model,
    modelFor: (name) => workflowModel(name),
    engage: {
      workspaceDir: state.workspaceDir,
      policy,
      hooks,
      ledger,
      skills: { library: skills, ...engageDefaults.skills },
      limits: engageDefaults.limits,
      context: engageDefaults.context,
      modelCallOptions: engageDefaults.modelCallOptions,
      logger,
      clock,
    },
    workspaceDir: state.workspaceDir,
    isUserTurnActive: (agentId) => (userTurns.get(agentId) ?? 0) > 0,
    clock,
    idGenerator,
    logger,
  });
  const healthSamples = createHealthSampler({
    clock,
    logger,
    gauges: async () => {
      const counts = await workCore.queue.counts();
      const queueDepth = (counts.queued ?? 0) + (counts.running ?? 0);
      slo.setQueueDepth(queueDepth);
      return {
        queueDepth,
        activeRuns: chat.activeRuns().length,
        agents: agents.agents?.listStates().length ?? 0,
      };
    },
  });
  bus.on('system:error', () => healthSamples.observeError());

  const runTurn = (
    input: Parameters<Parameters<typeof createChatService>[0]['runTurn']>[0],
  ): Promise<EngageResult> =>
    runEngage({
      model,
      messages: input.messages,
      tools: { registry: tools },
      workspaceDir: state.workspaceDir,
      policy,
      ...(approvers.has(input.sessionKey) ? { approve: approvers.get(input.sessionKey)! } : {}),
      hooks,
      ledger,
      skills: { library: skills, ...engageDefaults.skills },
      workItemId: input.workItemId,
      scope: { runId: input.runId, agentId: input.agentId, sessionKey: input.sessionKey },
      bus,
      signal: input.signal,
      limits: engageDefaults.limits,
      context: engageDefaults.context,
      modelCallOptions: engageDefaults.modelCallOptions,
      beforeFinish: input.beforeFinish,
      logger,
      clock,
    });

  const inboxNamespace = 'chat-inbox';
  // The name this process's chat writes on the runs it marks and the messages it accepts: another process on
  // the same database leaves them to it while it may be alive (migration 0049), seen by its pid on this host
  // and by its lease from another (migration 0050), written before any chat write.
  const chatOwner = openOwner();
  const chatLease = await createChatOwnerLease({
    db: store.db,
    ownerId: chatOwner,
    leaseMs: chatConfig.ownerLeaseMs,
    logger,
  });
  const chat = createChatService({
    sessions: store.sessions,
    inbox: {
      put: async (message) => {
        try {
          // A transaction, not a statement of its own: on SQLite it can share the commit of transactions
          // queued with it (the put still settles only after that commit, so the ack follows the disk).
          await store.db.transaction(
            (tx) =>
              store.kv.set(
                inboxNamespace,
                message.runId,
                JSON.stringify({ ...message, owner: chatOwner }),
                tx,
              ),
            { ambient: false },
          );
        } catch (error) {
          // The client gets STORE_UNAVAILABLE; health and the other clients must see the store degraded too.
          if (isStoreUnavailable(error)) memory.reportWriteFailure(error);
          throw error;
        }
      },
      delete: async (runId, tx) => {
        await store.kv.delete(inboxNamespace, runId, tx);
      },
      list: async () =>
        (await store.kv.list(inboxNamespace)).map((entry) => JSON.parse(entry.value) as PendingMessage),
      get: async (runId) => {
        const value = await store.kv.get(inboxNamespace, runId);
        return value === undefined ? undefined : (JSON.parse(value) as PendingMessage);
      },
      // On the session's row, which the same commits update for the message count (migration 0023).
      markRunning: (run, tx) =>
        store.sessions.markRunning(
          run.sessionId,
          { runId: run.runId, startedAt: run.startedAt, owner: chatOwner },
          run.activity,
          tx,
        ),
      markEnded: (run, tx) => store.sessions.markEnded(run.sessionKey, run.runId, run.activity, tx),
      markEndedWithoutReply: (run, tx) => store.sessions.markEndedWithoutReply(run, tx),
      listRunning: () => store.sessions.listRunning(),
      listUnreplied: () => store.sessions.listUnrepliedRuns(),
      leasedOwners: () => chatLease.live(),
    },
    memory,
    identity,
    bus,
    runTurn: async (input) => {
      const started = clock.now();
      let status = 'error';
      let code: string = ErrorCodes.internal;
      try {
        const result = await runTurn(input);
        status = result.status;
        code = result.error?.code ?? code;
        // Provider error texts can echo request data; they reach clients through `wait`, so scrub them here.
        if (result.error)
          result.error = { ...result.error, message: redactor.redactText(result.error.message) };
        return result;
      } finally {
        const elapsedMs = clock.now() - started;
        slo.recordResponse(elapsedMs / 1000, status);
        if (status === 'error') slo.recordError('chat', code);
        healthSamples.observeTurn(elapsedMs, status === 'error');
      }
    },
    slashCommands: {
      goal: ({ argument, sessionKey, agentId }) => agents.goal({ argument, sessionKey, agentId }),
    },
    recallRefreshMs: memoryConfig.recall.promptReuseMs,
    maxQueuedTurnsPerSession: chatConfig.maxQueuedTurnsPerSession,
    maxQueuedTurns: chatConfig.maxQueuedTurns,
    onRecall: (outcome) => slo.recordRecall(outcome),
    onTurnActivity: (agentId, active) => {
      // Only agents with a turn running: session keys name agent ids of a caller's choosing.
      const turns = (userTurns.get(agentId) ?? 0) + (active ? 1 : -1);
      if (turns > 0) userTurns.set(agentId, turns);
      else userTurns.delete(agentId);
    },
    clock,
    idGenerator,
    logger,
  });
  announcements.bind(chat);

  const health = (): Record<string, unknown> => {
    // A store that cannot take writes right now is degraded like one that fell back to RAM at start.
    const writes = memory.status();
    const degradedReason = store.degradedReason ?? writes.degradedReason;
    return {
      status:
        (store.mode === 'memory' && (config.databaseUrl || store.degradedReason)) || writes.degraded
          ? 'degraded'
          : 'ok',
      version,
      uptimeMs: clock.now() - startedAt,
      store: {
        mode: store.mode,
        location: redactor.redactText(store.db.location),
        persistent: store.db.persistent && !writes.degraded,
        writable: !writes.degraded,
        ...('walBatching' in store.db ? { walBatching: store.db.walBatching === true } : {}),
        ...(writes.pendingWrites > 0 ? { pendingWrites: writes.pendingWrites } : {}),
        ...(degradedReason ? { degradedReason: redactor.redactText(degradedReason) } : {}),
      },
      model: { name: modelName, provider: model.provider },
      features: config.features,
      runs: { active: chat.activeRuns().length },
      ...(Object.keys(mcpConfig.servers).length > 0
        ? {
            mcp: Object.fromEntries(
              mcp.list().map((server) => [
                server.name,
                {
                  state: server.state,
                  tools: server.tools.length,
                  ...(server.lastError ? { lastError: redactor.redactText(server.lastError) } : {}),
                },
              ]),
            ),
          }
        : {}),
    };
  };

  const services = createGatewayServices({
    chat,
    sessions: store.sessions,
    memory,
    models: createModelCatalog({ defaultModel: modelName, agents: config.agents, contextWindowFor }),
    agents: {
      list: () => {
        const live = agents.agents?.listStates() ?? [];
        const configured = [{ id: 'main' }, ...config.agents];
        return [
          ...live.map((agent) => ({ id: agent.id, name: agent.name })),
          ...configured
            .filter((agent) => !live.some((other) => other.id === agent.id))
            .map((agent) => ({
              id: agent.id,
              ...('name' in agent && agent.name ? { name: agent.name } : {}),
            })),
        ];
      },
      workCounts: () => workCore.queue.counts(),
    },
    health: {
      health,
      status: async () => {
        const agentIds = [...new Set(['main', ...config.agents.map((agent) => agent.id)])];
        const identities = await Promise.all(
          agentIds.map(async (agentId) => {
            const packet = await identity.load(agentId);
            return [
              agentId,
              { layers: packet.layers, shadowed: packet.shadowed, warnings: packet.warnings },
            ] as const;
          }),
        );
        return {
          ...health(),
          memory: memory.status(),
          loadedSessions: memory.loadedSessions().length,
          identity: Object.fromEntries(identities),
          work: await workCore.queue.counts(),
        };
      },
    },
  });
  registerCoreMethods(methods, services, { clock });
  registerHealthSamplesMethod(methods, healthSamples);
  registerOpsMethods({ methods, logs: logRing, clock });

  const workflowsConfig = parseSection(workflowsConfigSchema, config.sections.workflows, 'workflows');
  const workflowRoots = workflowsConfig.dirs
    ? workflowsConfig.dirs.map((dir) =>
        resolve(config.configPath ? dirname(config.configPath) : state.home, dir),
      )
    : [join(state.home, 'workflow-library')];
  // One lease for every engine of this process, and one sweep for the runs of processes that died.
  const workflowRunOwner = createRunOwner({ db: store.db, leaseMs: workflowsConfig.runLeaseMs, logger });
  const interruptedRunSweep = createInterruptedRunSweep({
    db: store.db,
    owner: workflowRunOwner,
    intervalMs: workflowsConfig.runLeaseMs,
    logger,
  });
  const workflows = registerWorkflowMethods({
    methods,
    bus,
    db: store.db,
    runOwner: workflowRunOwner,
    stateDir: state.home,
    allowedRoots: workflowRoots,
    resolveModel: workflowModel,
    runAgentWithTools: createWorkflowAgentRunner({
      bus,
      workspaceDir: state.workspaceDir,
      idGenerator,
      logger,
      redactText: redactor.redactText,
    }),
    dispatch: () => workCore.workflowDispatch,
    logger,
  });
  registerWorkflowViewMethods({ methods, bus, workflows, db: store.db, logger });
  // No clock of the runtime's: the engines stamp their runs with the system clock (registerWorkflowMethods
  // gives them none), and the cutoff is compared with those stamps.
  const workflowRetention = createWorkflowRetention({
    db: store.db,
    retainEndedDays: workflowsConfig.retainEndedDays,
    logger,
  });

  registerSkillMethods({
    methods,
    library: skills,
    experience: skillExperience,
    staleAfterDays: skillsConfig.staleAfterDays,
  });
  // Findings recur as work completes: each completion (not the runtime's own upkeep) prompts a scan.
  const systemKinds = new Set(agents.queue.config.systemKinds);
  bus.on('work:completed', (event) => {
    if (!systemKinds.has(event.data.kind)) skillExperience.scheduleScan();
  });

  // Scheduled jobs: a due job sends a chat message or submits a work item, like a client would.
  const cron = createCronScheduler({
    db: store.db,
    clock,
    idGenerator,
    logger,
    actions: {
      sendChat: async ({ sessionKey, agentId, text, idempotencyKey }) => {
        const ack = await chat.send({ sessionKey, agentId, text, idempotencyKey });
        return { runId: ack.runId };
      },
      submitWork: async (submission) => {
        const submitted = agents.pool
          ? await agents.pool.submit(submission)
          : await agents.queue.submit(submission);
        return { id: submitted.id };
      },
    },
  });
  registerCronMethods({ methods, cron });

  let gateway: GatewayServer | undefined;
  let background: Promise<void> | undefined;
  const startBackground = () => {
    healthSamples.start();
    cron.start();
    interruptedRunSweep.start();
    workflowRetention.start();
    skillActivationRetention.start();
    background ??= agents.start();
    return background;
  };

  let chatResumed: Promise<string[]> | undefined;
  // Once resumed, what a process of another host left is taken when its lease lapses (a crash there).
  let lapsedSweep: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> | undefined;
  const sweepLapsedOwners = async () => {
    try {
      const lapsed = await chatLease.lapsed();
      if (lapsed.length === 0) return;
      const resumed = await chat.takeOverGone();
      await chatLease.forget(lapsed);
      if (resumed.length > 0)
        logger.warn(
          { runIds: resumed },
          `resumed ${resumed.length} chat message(s) a stopped process accepted`,
        );
    } catch (error) {
      logger.warn({ err: error }, 'could not take over the chat of a stopped process; trying again');
    }
  };
  const resumeChat = () => {
    chatResumed ??= chat.resumePending().then((resumed) => {
      if (resumed.length > 0)
        logger.warn(
          { runIds: resumed },
          `resumed ${resumed.length} chat message(s) accepted before a restart`,
        );
      if (!closing.started) {
        lapsedSweep = setInterval(() => {
          sweeping ??= sweepLapsedOwners().finally(() => {
            sweeping = undefined;
          });
        }, chatConfig.ownerLeaseMs / 3);
        lapsedSweep.unref();
      }
      return resumed;
    });
    return chatResumed;
  };

  let prepared: Promise<void> | undefined;
  const prepareFirstTurn = async () => {
    const startedAt = clock.now();
    const parts: Array<[part: string, load: () => unknown]> = [
      ['skills', () => skills.catalog()],
      ['tools', () => tools.toModelTools()],
      ['model', () => model.prepare?.()],
    ];
    await Promise.all(
      parts.map(async ([part, load]) => {
        try {
          await load();
        } catch (error) {
          logger.warn({ err: error, part }, 'preparing the first chat turn failed');
        }
      }),
    );
    logger.debug({ durationMs: clock.now() - startedAt }, 'first chat turn prepared');
  };

  // A second caller of `close` waits for the same close: it may remove the home once its own call resolves.
  const closing = once(async () => {
    healthSamples.stop();
    cron.stop();
    if (gateway) await gateway.close();
    clearInterval(lapsedSweep);
    await sweeping;
    await chat.drain();
    // Its runs ended and persisted: what it left marked or waiting is the next start's.
    closeOwner(chatOwner);
    await chatLease.close();
    // Its skill discovery may still be writing the kept front matter to the store.
    await prepared;
    await mcp.close();
    await agents.close();
    skillExperience.stop();
    await skillExperience.idle();
    await skillActivationRetention.stop();
    await workflows.close();
    await interruptedRunSweep.stop();
    await workflowRunOwner.close();
    await workflowRetention.stop();
    await sandbox?.close();
    await memoryManager.stop();
    await memory.flushEmbeddings().catch(() => {});
    identity.close();
    await auditRetention.stop();
    await recorder.stop();
    await store.close();
    await telemetry.shutdown();
  });

  return {
    version,
    config,
    state,
    logger,
    redactor,
    bus,
    store,
    model,
    modelName,
    memory,
    memoryManager,
    identity,
    ledger,
    skills,
    skillExperience,
    tools,
    mcp,
    policy,
    registerApprover(sessionKey, approver) {
      approvers.set(sessionKey, approver);
      return () => {
        if (approvers.get(sessionKey) === approver) approvers.delete(sessionKey);
      };
    },
    chat,
    methods,
    services,
    metrics,
    healthSamples,
    health,

    work: agents,
    startBackground,
    resumeChat,

    async startGateway(gatewayOptions = {}) {
      await startBackground();
      const { createGatewayServer, createStaticSite } = await loadGatewayServer();
      gateway = createGatewayServer({
        host: gatewayOptions.host ?? config.host,
        port: gatewayOptions.port ?? config.port,
        token: state.token,
        noAuth: gatewayOptions.noAuth ?? false,
        allowedOrigins: gatewayConfig.allowedOrigins,
        allowedHosts: gatewayConfig.allowedHosts,
        limits: gatewayConfig.limits,
        devicePairings: createStoredDevicePairings(store.kv),
        methodTable: methods,
        bus,
        services,
        httpRoutes: [
          {
            method: 'GET',
            path: '/metrics',
            handler: (_request, response) => {
              const body = metrics.render();
              response.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
              response.end(body);
            },
          },
        ],
        staticSite: createStaticSite({ dir: join(packageRoot(), 'dist', 'dashboard') }),
        logger,
        clock,
        idGenerator,
        serverVersion: version,
      });
      const { url } = await gateway.listen();
      await resumeChat();
      return { url, server: gateway };
    },

    async goal({ text, agentId = 'main', sessionKey, idempotencyKey }) {
      return agents.goal({
        argument: text.trim(),
        agentId,
        sessionKey: sessionKey ?? `agent:${agentId}:main`,
        ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
      });
    },

    async runWorkflow({ dir, input, confined }) {
      return workflows.run({ dir, input, ...(confined ? { confined } : {}) });
    },

    async sendMessage({ text, agentId = 'main', sessionKey, timeoutMs }) {
      const key = sessionKey ?? `agent:${agentId}:main`;
      const { runId } = await chat.send({
        sessionKey: key,
        agentId,
        text,
        idempotencyKey: idGenerator('run'),
      });
      const record = await chat.wait(runId, timeoutMs === undefined ? {} : { timeoutMs });
      return {
        runId,
        status: record.status,
        text: record.text,
        sessionKey: key,
        ...(record.error ? { error: { code: record.error.code, message: record.error.message } } : {}),
      };
    },

    prepare() {
      // After close() there is no turn to prepare, and the store it would write to is closed.
      prepared ??= closing.started ? Promise.resolve() : prepareFirstTurn();
      return prepared;
    },

    close: closing.run,
  };
}

function withExtraAgents(config: AgentdConfig, extra: readonly AgentDefinition[]): AgentdConfig {
  if (extra.length === 0) return config;
  const ids = new Set(config.agents.map((agent) => agent.id));
  for (const agent of extra) {
    if (ids.has(agent.id))
      throw new UserInputError({
        code: ErrorCodes.conflict,
        message: `The agent "${agent.id}" is defined twice (in the config and in createRuntime's agents, or twice there).`,
      });
    ids.add(agent.id);
  }
  return { ...config, agents: [...config.agents, ...extra] };
}
