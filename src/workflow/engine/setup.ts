import { createPolicy } from '../../tools/index.js';
import { ErrorCodes, silentLogger, systemClock, UserInputError } from '../../util/index.js';
import { type AdapterRegistry, createAdapterRegistry } from '../adapters.js';
import { createArtifactStore } from '../artifacts.js';
import { type CredentialVault, loadCredentials, redactValue } from '../credentials.js';
import { FreshMap } from '../fresh-map.js';
import type { ContextProfile } from '../manifest-schemas.js';
import {
  createInMemoryStore,
  createSqlMemoryStore,
  type MemoryStore,
  type MemoryStoreKind,
} from '../memory-store.js';
import { createWorkflowMetrics } from '../metrics.js';
import { createSqlRecordStore, type WorkflowRecordStore } from '../record-store.js';
import { concludeInterruptedRuns, createRunOwner, type RunOwner } from '../run-owners.js';
import { createPluginHost, type PluginHost } from '../telemetry.js';
import { compileInputCheck, type LoadedTool, unknownFunctionError } from '../tools.js';
import { validateReferences, WorkflowValidationError } from '../validate.js';
import type { EngineCore, MemoryAddOptions } from './core.js';
import { createEmitter } from './emitter.js';
import { createPersister } from './persistence.js';
import { createRunIdGenerator, type RunIdGenerator } from './run-state.js';
import type { CreateWorkflowEngineOptions } from './types.js';

/** Binds `function:` tools to the registered functions; reports the capabilities the manifests lack. */
export function bindTools(options: CreateWorkflowEngineOptions): Map<string, LoadedTool> {
  const { workflow } = options;
  const functions = options.functions ?? {};
  const issues = validateReferences(workflow.manifests, {
    agentToolsSupported: options.runAgentWithTools !== undefined,
  }).filter((issue) => issue.rule === 'agent-tools-need-engage');
  const tools = new Map<string, LoadedTool>();
  for (const [id, tool] of workflow.tools) {
    if (tool.entrypoint.kind !== 'function') {
      tools.set(id, tool);
      continue;
    }
    const bound = functions[tool.entrypoint.name];
    if (bound) {
      tools.set(id, { ...tool, invoke: bound });
      continue;
    }
    issues.push({
      file: 'tools.yaml',
      path: `tools[${workflow.manifests.tools.tools.findIndex((entry) => entry.id === id)}].entrypoint`,
      rule: 'tools-load',
      message: unknownFunctionError(tool.entrypoint.name).message,
    });
  }
  if (issues.length > 0) throw new WorkflowValidationError(workflow.dir, issues);
  return tools;
}

/** Context profiles by id, with the implicit `global` profile (recency over the global store). */
export function contextProfiles(options: CreateWorkflowEngineOptions): Map<string, ContextProfile> {
  const memory = options.workflow.manifests.memory.memory;
  const profiles = new Map<string, ContextProfile>(
    memory.context_profiles.map((profile) => [profile.id, profile]),
  );
  profiles.set('global', {
    id: 'global',
    max_tokens: memory.global_context_max_tokens,
    retrieval_policy: 'recency',
    sources: [{ store: 'global', tags: [] }],
    metadata: {},
  });
  return profiles;
}

export interface EngineSetup {
  core: EngineCore;
  vault: CredentialVault;
  adapters: AdapterRegistry;
  plugins: PluginHost;
  records: WorkflowRecordStore | undefined;
  /**
   * The engine's own run ids when both the clock and the ids are the defaults: handed the clock reading
   * the run was accepted at, which is then `Date.now()` too, rather than reading it again.
   */
  runIds: RunIdGenerator | undefined;
  /** The lease the engine made for itself (no `runOwner` given), for `close()` to give up. */
  ownRunOwner: RunOwner | undefined;
}

/** Builds everything an engine's steps need from its options; nothing runs yet. */
export async function setupEngine(options: CreateWorkflowEngineOptions): Promise<EngineSetup> {
  const { workflow } = options;
  const clock = options.clock ?? systemClock;
  const runIds =
    options.idGenerator === undefined && options.clock === undefined ? createRunIdGenerator() : undefined;
  const idGenerator = options.idGenerator ?? runIds ?? createRunIdGenerator();
  const logger = (options.logger ?? silentLogger).child({ component: 'workflow', workflowId: workflow.id });
  const tools = bindTools(options);

  const vault = loadCredentials(workflow.manifests.credentials, {
    dir: workflow.dir,
    ...(options.env ? { env: options.env } : {}),
  });
  const adapters = createAdapterRegistry({
    agents: workflow.manifests.agents.agents,
    credentials: vault,
    resolveModel: options.resolveModel,
    ...(options.modelOverride ? { modelOverride: options.modelOverride } : {}),
  });
  const plugins = createPluginHost(
    workflow.plugins.map((entry) => entry.plugin),
    logger,
  );
  const schemaChecks = new Map<string, (value: unknown) => string | undefined>();
  for (const [id, schema] of workflow.schemas) schemaChecks.set(id, compileInputCheck(schema));

  // Storage is the platform's: the engine keeps runs and `sqlite` memory in the database it is given
  // (migrated by whoever opened it), and opens none itself.
  const database = options.database;
  const durable = options.durable ?? database !== undefined;
  const needsSql = Object.values(workflow.memory.stores).some((store) => store.backend === 'sqlite');
  if (!database && (durable || needsSql)) {
    throw new UserInputError({
      code: ErrorCodes.invalidConfig,
      message: `workflow "${workflow.id}" needs a database (${durable ? 'durable runs' : 'a sqlite memory store'}): pass the runtime's database as \`database\``,
    });
  }
  // The engine's own lease when the runtime shares none (the in-process CLI's engine): a sweep first, so a
  // run a crash of an earlier process left open is concluded before this one writes beside it.
  const ownRunOwner =
    durable && database && !options.runOwner ? createRunOwner({ db: database, logger }) : undefined;
  // Tidying only: a database that refuses it (a full disk) must not keep the workflow from running.
  if (ownRunOwner && database)
    await concludeInterruptedRuns(database, { now: Date.now(), ownOwnerId: ownRunOwner.id, logger }).catch(
      (error: unknown) => logger.warn({ err: error }, 'could not conclude the interrupted workflow runs'),
    );
  const runOwner = options.runOwner ?? ownRunOwner;
  const records = durable && database ? createSqlRecordStore(database, runOwner) : undefined;
  const openStore = async (kind: MemoryStoreKind): Promise<MemoryStore> => {
    const plan = workflow.memory.stores[kind];
    const retention = plan.maxItems === undefined ? {} : { maxItems: plan.maxItems };
    if (plan.backend === 'sqlite')
      return createSqlMemoryStore({ kind, ...retention, db: database!, scope: workflow.id });
    return createInMemoryStore({ kind, ...retention });
  };
  const stores: Record<MemoryStoreKind, MemoryStore> = {
    task: await openStore('task'),
    project: await openStore('project'),
    global: await openStore('global'),
  };

  const redact = vault.hasSecrets ? <T>(value: T): T => redactValue(value, vault) : undefined;
  let memorySeq = 0;
  const addMemory = (store: MemoryStoreKind, payload: unknown, memoryOptions: MemoryAddOptions) =>
    stores[store].add({
      id: `${store}_${clock.now().toString(36)}_${(++memorySeq).toString(36)}_${idGenerator('m').slice(-6)}`,
      ...(store === 'task' && memoryOptions.taskId ? { taskId: memoryOptions.taskId } : {}),
      projectId: workflow.id,
      payload,
      tags: memoryOptions.tags ?? [],
      protected: memoryOptions.protected ?? false,
      metadata: memoryOptions.metadata ?? {},
      createdAt: clock.now(),
    });

  const core: EngineCore = {
    workflow,
    clock,
    logger,
    idGenerator,
    workDir: options.workDir ?? process.cwd(),
    functions: options.functions ?? {},
    tools,
    agents: new Map(workflow.manifests.agents.agents.map((agent) => [agent.id, agent])),
    adapters,
    runAgentWithTools: options.runAgentWithTools,
    modelRetry: options.modelRetry,
    policy: createPolicy(workflow.manifests.policy),
    metrics: createWorkflowMetrics(),
    artifacts: createArtifactStore(),
    schemaChecks,
    profiles: contextProfiles(options),
    stores,
    redact,
    redactText: (text) => vault.redact(text),
    taskIndex: new FreshMap(),
    emitter: createEmitter({
      workflowId: workflow.id,
      clock,
      logger,
      plugins,
      publish: options.publish,
      redact,
    }),
    durable: records !== undefined,
    persist: createPersister(records, logger, runOwner),
    addMemory,
  };
  return { core, vault, adapters, plugins, records, runIds, ownRunOwner };
}
