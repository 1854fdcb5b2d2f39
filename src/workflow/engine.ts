import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { ModelRetryOptions } from '../model/index.js';
import { createSqliteDatabase, migrate, type SqlDatabase } from '../store/index.js';
import { type Clock, systemClock } from '../util/clock.js';
import { AgentdError, ErrorCodes, UserInputError } from '../util/errors.js';
import type { IdGenerator } from '../util/ids.js';
import { type Logger, silentLogger } from '../util/logger.js';
import { type AdapterMetadata, createAdapterRegistry, type WorkflowModelResolver } from './adapters.js';
import { type AgentToolSpec, errorShape, type RunAgentWithTools, runAgentNode } from './agent-node.js';
import { type Artifact, type ArtifactQuery, createArtifactStore } from './artifacts.js';
import { type AssembledContext, assembleContext, type ContextItem } from './context.js';
import { type CredentialMetadata, loadCredentials, redactValue } from './credentials.js';
import type { DagNode } from './dag.js';
import { type CustomAssertion, type EvaluationReport, runEvaluationSuites } from './evaluation.js';
import { buildInspection, type InspectionReport } from './inspector.js';
import type { LoadedWorkflow, WorkflowMetadata } from './loader.js';
import type { AgentDefinition, ContextProfile, WorkflowEdgeManifest } from './manifest-schemas.js';
import {
  createInMemoryStore,
  createJsonlMemoryStore,
  createSqlMemoryStore,
  type MemoryItem,
  type MemoryStore,
  type MemoryStoreKind,
} from './memory-store.js';
import { createWorkflowMetrics, type MetricsSnapshot } from './metrics.js';
import { createPolicyEvaluator } from './policy.js';
import { createSqlRecordStore, type WorkflowRecordStore } from './record-store.js';
import { createFifoExecutor, type ScheduledTaskState, type TaskExecutor } from './scheduler.js';
import {
  outcomeOf,
  type StageRecord,
  statusViewOf,
  type TaskSpec,
  type TaskState,
  type TaskStatusView,
  type ToolCallRecord,
  type WorkflowOutcome,
  type WorkflowTask,
} from './task.js';
import {
  busEventTypeOf,
  createPluginHost,
  type TelemetryEvent,
  type TelemetryEventType,
  type TelemetryListener,
  type WorkflowBusEventData,
  type WorkflowBusEventType,
} from './telemetry.js';
import {
  compileInputCheck,
  createScopedFiles,
  type LoadedTool,
  type ScopedFiles,
  ToolMisuseError,
  unknownFunctionError,
  type WorkflowFunction,
  type WorkflowFunctionContext,
} from './tools.js';
import { validateReferences, WorkflowValidationError } from './validate.js';

export interface CreateWorkflowEngineOptions {
  workflow: LoadedWorkflow;
  /** `provider/model` → LanguageModel; needed by agent nodes. The runtime passes the model registry's. */
  resolveModel?: WorkflowModelResolver;
  /** The runtime's database (migrations applied). Holds run records and the `sqlite` memory stores. */
  database?: SqlDatabase;
  /**
   * The workflow's state directory: `jsonl` memory files, REPL history, evaluation baselines, and — when no
   * `database` is given — `workflow.db`, a SQLite file for run records and `sqlite` memory stores.
   */
  stateDir?: string;
  /** Persist every stage record, task, event and artifact. Default: true when `database` or `stateDir` is set. */
  durable?: boolean;
  /** Receives every telemetry event as a `workflow:*` bus event (pass `bus.publish.bind(bus)`). */
  publish?: (type: WorkflowBusEventType, data: WorkflowBusEventData) => void;
  /** The engage loop, for agent nodes that list tools. Without it such nodes make the workflow invalid. */
  runAgentWithTools?: RunAgentWithTools;
  /** Deterministic functions: by node id (the node's body) or by name (tools with `entrypoint: function:<name>`). */
  functions?: Readonly<Record<string, WorkflowFunction>>;
  /** Custom evaluation assertions by name. */
  assertions?: Readonly<Record<string, CustomAssertion>>;
  /** Where runs execute; default an in-process FIFO executor configured by scheduler.yaml. */
  executor?: TaskExecutor;
  /**
   * Hands each run, when the scheduler starts it, to something that executes it — the agentd runtime puts it
   * on the durable work queue so a worker of the pool runs it (visible, leased, cancellable like any work
   * item). Without it the scheduler calls the run directly.
   */
  dispatch?: (
    taskId: string,
    execute: () => Promise<'completed' | 'failed'>,
  ) => Promise<'completed' | 'failed'>;
  /** Base of tool `permissions.root` and of file access by functions. Default `process.cwd()`. */
  workDir?: string;
  /** Environment for credentials (default `process.env`). */
  env?: Record<string, string | undefined>;
  /** Finished runs kept in memory for `status`/`inspect`; older ones are still in the database when durable. */
  retainRuns?: number;
  modelRetry?: ModelRetryOptions;
  /** `provider/model` for every agent instead of its `llm` in agents.yaml (the CLI's `--model`). */
  modelOverride?: string;
  clock?: Clock;
  idGenerator?: IdGenerator;
  logger?: Logger;
}

export interface RunOptions {
  signal?: AbortSignal;
  /** Use this id for the root task instead of a generated one. */
  taskId?: string;
  /** A non-default START node to begin at. */
  startNodeId?: string;
  spec?: Partial<Pick<TaskSpec, 'mode' | 'priority' | 'hints' | 'files' | 'overrides' | 'metadata'>>;
}

export interface WorkflowRunResult {
  taskId: string;
  workflowId: string;
  status: WorkflowOutcome;
  state: TaskState;
  output: unknown;
  error?: { code: string; message: string; nodeId?: string };
  stagesExecuted: number;
  childTaskIds: string[];
  startedAt: number;
  completedAt: number;
  metadata: WorkflowMetadata;
}

export interface QueueStatus {
  enabled: boolean;
  queued: number;
  running: number;
  paused: boolean;
  maxConcurrency: number;
  maxQueueSize: number | null;
  tasks: Array<{ taskId: string; state: ScheduledTaskState }>;
}

export interface WorkflowEngine {
  readonly workflow: LoadedWorkflow;
  readonly metadata: WorkflowMetadata;
  /** Runs one task to its end through the scheduler. Rejects only with QUEUE_FULL or bad options. */
  run(input: unknown, options?: RunOptions): Promise<WorkflowRunResult>;
  /** Queues a run and returns at once; `result` settles when it ends. Throws QUEUE_FULL when rejected. */
  enqueue(input: unknown, options?: RunOptions): { taskId: string; result: Promise<WorkflowRunResult> };
  /** Starts everything queued (resuming a paused scheduler) and resolves when the queue is empty. */
  runQueued(): Promise<void>;
  /** Hold queued runs until `runQueued` (running ones continue). */
  pauseQueue(): void;
  queueStatus(): QueueStatus;
  /** Any task of a retained run (root, clone or subtask). */
  status(taskId: string): TaskStatusView | undefined;
  /** Cancels the run containing the task (queued or running). True when there was something to cancel. */
  cancel(taskId: string): boolean;
  /** History, lineage, events, artifacts and a summary; from memory, else from the database when durable. */
  inspect(taskId: string): Promise<InspectionReport | undefined>;
  runEvaluations(options?: { suites?: string[]; baselinePath?: string }): Promise<EvaluationReport>;
  subscribe(listener: TelemetryListener): () => void;
  artifacts(query: ArtifactQuery): Artifact[];
  memory: {
    add(
      store: MemoryStoreKind,
      payload: unknown,
      options?: { taskId?: string; tags?: string[]; protected?: boolean },
    ): Promise<MemoryItem>;
    list(store: MemoryStoreKind, filter?: { taskId?: string }): Promise<MemoryItem[]>;
  };
  metrics(): MetricsSnapshot;
  adapters(): AdapterMetadata[];
  credentials(): CredentialMetadata[];
  close(): Promise<void>;
}

interface MergeInput {
  task_id: string;
  node_id: string | undefined;
  status: WorkflowOutcome;
  output: unknown;
  error?: { code: string; message: string };
  stage_result_index: number;
  timestamp: number;
  lineage_metadata: Record<string, unknown>;
}

interface Run {
  root: WorkflowTask;
  tasks: Map<string, WorkflowTask>;
  events: TelemetryEvent[];
  seq: number;
  /** Created on first use (a node needing a signal, or a cancel): most deterministic runs never need one. */
  controller: AbortController | undefined;
  cancelled: boolean;
  /** FIFO of (task, node) stages to execute; `head` avoids O(n) shifts. */
  queue: Array<{ task: WorkflowTask; nodeId: string } | undefined>;
  head: number;
  /** Parents whose children are all terminal and that will execute a MERGE with these inputs. */
  pendingMerges: Map<string, MergeInput[]>;
  startNodeId: string;
  finished: boolean;
  resolve: (result: WorkflowRunResult) => void;
  result: Promise<WorkflowRunResult>;
  persistQueue: Promise<void>;
}

const eventMetadataCache = new WeakMap<LoadedWorkflow, { workflowId: string }>();

/**
 * Task ids: `<prefix>_<ms since epoch, base 36><8 random hex chars per engine><counter, base 36>`. Unique
 * across processes sharing a database, time-ordered, and without a random draw per run (the default
 * util generator draws 8 random bytes per id, a measurable cost on the per-run hot path).
 */
function createRunIdGenerator(): IdGenerator {
  const instance = randomBytes(4).toString('hex');
  let counter = 0;
  return (prefix = 'id') => `${prefix}_${Date.now().toString(36)}${instance}${(counter++).toString(36)}`;
}

function normalizeRequest(input: unknown): string {
  if (typeof input === 'string') return input;
  if (
    typeof input === 'object' &&
    input !== null &&
    typeof (input as { request?: unknown }).request === 'string'
  ) {
    return (input as { request: string }).request;
  }
  return JSON.stringify(input ?? null);
}

/** Creates an engine for one loaded workflow: opens memory stores and the run database, validates capabilities. */
export async function createWorkflowEngine(options: CreateWorkflowEngineOptions): Promise<WorkflowEngine> {
  const { workflow } = options;
  const clock = options.clock ?? systemClock;
  const idGenerator = options.idGenerator ?? createRunIdGenerator();
  const logger = (options.logger ?? silentLogger).child({ component: 'workflow', workflowId: workflow.id });
  const functions = options.functions ?? {};
  const workDir = options.workDir ?? process.cwd();
  const retainRuns = options.retainRuns ?? 100;

  // Capabilities the manifests depend on: engage loop for agent tools, registered functions.
  const capabilityIssues = validateReferences(workflow.manifests, {
    agentToolsSupported: options.runAgentWithTools !== undefined,
  }).filter((issue) => issue.rule === 'agent-tools-need-engage');
  const tools = new Map<string, LoadedTool>();
  for (const [id, tool] of workflow.tools) {
    if (tool.entrypoint.kind === 'function') {
      const bound = functions[tool.entrypoint.name];
      if (!bound) {
        capabilityIssues.push({
          file: 'tools.yaml',
          path: `tools[${workflow.manifests.tools.tools.findIndex((entry) => entry.id === id)}].entrypoint`,
          rule: 'tools-load',
          message: unknownFunctionError(tool.entrypoint.name).message,
        });
        continue;
      }
      tools.set(id, { ...tool, invoke: bound });
    } else tools.set(id, tool);
  }
  if (capabilityIssues.length > 0) throw new WorkflowValidationError(workflow.dir, capabilityIssues);

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
  const agents = new Map<string, AgentDefinition>(
    workflow.manifests.agents.agents.map((agent) => [agent.id, agent]),
  );
  const policy = createPolicyEvaluator(workflow.manifests.policy);
  const metricsStore = createWorkflowMetrics();
  const artifactStore = createArtifactStore();
  const plugins = createPluginHost(
    workflow.plugins.map((entry) => entry.plugin),
    logger,
  );
  const schemaChecks = new Map<string, (value: unknown) => string | undefined>();
  for (const [id, schema] of workflow.schemas) schemaChecks.set(id, compileInputCheck(schema));
  const profiles = new Map<string, ContextProfile>(
    workflow.manifests.memory.memory.context_profiles.map((profile) => [profile.id, profile]),
  );
  const globalProfile: ContextProfile = {
    id: 'global',
    max_tokens: workflow.manifests.memory.memory.global_context_max_tokens,
    retrieval_policy: 'recency',
    sources: [{ store: 'global', tags: [] }],
    metadata: {},
  };

  // Storage: the runtime's database, else a SQLite file in the state dir when something needs one.
  const needsSql = Object.values(workflow.memory.stores).some((store) => store.backend === 'sqlite');
  const durable = options.durable ?? (options.database !== undefined || options.stateDir !== undefined);
  let database = options.database;
  let ownsDatabase = false;
  if (!database && (durable || needsSql)) {
    if (!options.stateDir) {
      throw new UserInputError({
        code: ErrorCodes.invalidConfig,
        message: `workflow "${workflow.id}" needs a database (durable runs or a sqlite memory store): pass database or stateDir`,
      });
    }
    const { mkdirSync } = await import('node:fs');
    mkdirSync(options.stateDir, { recursive: true });
    database = createSqliteDatabase({ path: join(options.stateDir, 'workflow.db'), logger });
    ownsDatabase = true;
    await migrate(database, { logger });
  }
  const records: WorkflowRecordStore | undefined =
    durable && database ? createSqlRecordStore(database) : undefined;

  const openStore = async (kind: MemoryStoreKind): Promise<MemoryStore> => {
    const plan = workflow.memory.stores[kind];
    const retention = plan.maxItems === undefined ? {} : { maxItems: plan.maxItems };
    if (plan.backend === 'jsonl') {
      if (!options.stateDir) {
        throw new UserInputError({
          code: ErrorCodes.invalidConfig,
          message: `memory.yaml: ${kind}_store uses the jsonl backend, which needs the engine's stateDir`,
        });
      }
      return createJsonlMemoryStore({
        kind,
        ...retention,
        path: join(options.stateDir, 'memory', `${kind}_store.jsonl`),
      });
    }
    if (plan.backend === 'sqlite')
      return createSqlMemoryStore({ kind, ...retention, db: database!, scope: workflow.id });
    return createInMemoryStore({ kind, ...retention });
  };
  const stores: Record<MemoryStoreKind, MemoryStore> = {
    task: await openStore('task'),
    project: await openStore('project'),
    global: await openStore('global'),
  };

  const listeners: TelemetryListener[] = [];
  const runs = new Map<string, Run>();
  const taskIndex = new Map<string, Run>();
  const finishedOrder: string[] = [];
  const eventMetadata = eventMetadataCache.get(workflow) ?? Object.freeze({ workflowId: workflow.id });
  eventMetadataCache.set(workflow, eventMetadata);
  const publish = options.publish;
  const redacting = vault.hasSecrets;

  const schedulerConfig = workflow.manifests.scheduler.scheduler;
  const executor =
    options.executor ??
    createFifoExecutor({
      maxConcurrency: schedulerConfig.enabled ? schedulerConfig.max_concurrency : 1,
      maxQueueSize: schedulerConfig.max_queue_size,
      now: () => clock.now(),
      listener: {
        queued: (taskId, depth) => emitStandalone('task_queued', taskId, { queueDepth: depth }),
        dequeued: (taskId, waitedMs, depth) =>
          emitStandalone('task_dequeued', taskId, { waitedMs, queueDepth: depth }),
        rejected: (taskId, depth) =>
          emitStandalone('queue_full', taskId, {
            queueDepth: depth,
            maxQueueSize: schedulerConfig.max_queue_size,
          }),
      },
    });

  await plugins.startup({ workflowId: workflow.id, metadata: workflow.metadata });

  // --- telemetry --------------------------------------------------------------------------------------

  function deliver(event: TelemetryEvent): void {
    for (const listener of listeners) {
      try {
        listener(event);
      } catch (error) {
        logger.warn({ err: error, eventType: event.type }, 'workflow telemetry listener threw; ignored');
      }
    }
    if (plugins.count > 0) plugins.dispatch(event);
    if (publish) {
      try {
        publish(busEventTypeOf(event.type), {
          eventId: event.eventId,
          workflowId: workflow.id,
          rootTaskId: event.rootTaskId,
          taskId: event.taskId,
          ...(event.stageId === undefined ? {} : { nodeId: event.stageId }),
          type: event.type,
          timestamp: event.timestamp,
          payload: event.payload,
        });
      } catch (error) {
        logger.warn({ err: error, eventType: event.type }, 'workflow bus publish threw; ignored');
      }
    }
  }

  function emit(
    run: Run,
    type: TelemetryEventType,
    taskId: string,
    stageId: string | undefined,
    payload: Record<string, unknown>,
  ): void {
    const event: TelemetryEvent = {
      eventId: `${run.root.taskId}:${++run.seq}`,
      rootTaskId: run.root.taskId,
      taskId,
      stageId,
      type,
      timestamp: clock.now(),
      payload: redacting ? redactValue(payload, vault) : payload,
      metadata: eventMetadata,
    };
    run.events.push(event);
    if (listeners.length > 0 || plugins.count > 0 || publish) deliver(event);
  }

  /** Scheduler events happen before or outside a run's own sequence; they go to listeners and the run log. */
  function emitStandalone(type: TelemetryEventType, taskId: string, payload: Record<string, unknown>): void {
    const run = runs.get(taskId);
    if (run) emit(run, type, taskId, undefined, payload);
    else {
      deliver({
        eventId: `${taskId}:q`,
        rootTaskId: taskId,
        taskId,
        stageId: undefined,
        type,
        timestamp: clock.now(),
        payload,
        metadata: eventMetadata,
      });
    }
  }

  // --- persistence ------------------------------------------------------------------------------------

  /** Writes are chained per run so they land in order without blocking the next stage's work. */
  function persist(run: Run, write: (store: WorkflowRecordStore) => Promise<void>): void {
    if (!records) return;
    run.persistQueue = run.persistQueue.then(() =>
      write(records).catch((error) => {
        logger.error({ err: error, rootTaskId: run.root.taskId }, 'persisting a workflow record failed');
      }),
    );
  }
  const cleanTask = (task: WorkflowTask): WorkflowTask => (redacting ? redactValue(task, vault) : task);

  // --- tasks ------------------------------------------------------------------------------------------

  function newTask(
    run: Run | undefined,
    fields: Partial<WorkflowTask> & Pick<WorkflowTask, 'taskId' | 'rootTaskId' | 'spec'>,
  ): WorkflowTask {
    const now = clock.now();
    const task: WorkflowTask = {
      workflowId: workflow.id,
      lifecycle: 'queued',
      state: 'pending',
      currentStageId: undefined,
      currentOutput: undefined,
      stageResults: {},
      history: [],
      routingTrace: [],
      failureSignatures: [],
      parentTaskId: undefined,
      lineageType: undefined,
      lineageMetadata: undefined,
      childTaskIds: [],
      fanOut: undefined,
      arrivedAtMerge: undefined,
      toleratedFailure: false,
      error: undefined,
      createdAt: now,
      updatedAt: now,
      completedAt: undefined,
      ...fields,
    };
    if (run) {
      run.tasks.set(task.taskId, task);
      taskIndex.set(task.taskId, run);
    }
    return task;
  }

  function conclude(run: Run, task: WorkflowTask, state: TaskState, error?: WorkflowTask['error']): void {
    if (task.lifecycle === 'concluded') return;
    task.state = state;
    task.lifecycle = 'concluded';
    if (error) task.error = error;
    task.completedAt = task.updatedAt = clock.now();
    const outcome = outcomeOf(state)!;
    emit(run, outcome === 'failure' ? 'task_failed' : 'task_completed', task.taskId, task.currentStageId, {
      status: outcome,
      state,
      ...(task.error ? { error: task.error } : {}),
      ...(task.parentTaskId ? { parentTaskId: task.parentTaskId } : {}),
    });
    persist(run, (store) => store.saveTask(cleanTask(task)));
    if (task.parentTaskId) childSettled(run, task);
  }

  /** The state a task ends in when it reaches an EXIT (or a merge as a child): decided before, reported here. */
  function settledState(task: WorkflowTask): TaskState {
    if (task.state === 'failed' || task.state === 'partial') return task.state;
    return task.toleratedFailure ? 'partial' : 'completed';
  }

  function mergeInputOf(child: WorkflowTask): MergeInput {
    const last = child.history.length - 1;
    const input: MergeInput = {
      task_id: child.taskId,
      node_id: child.history[last]?.nodeId,
      status: outcomeOf(child.state) ?? 'failure',
      output: child.currentOutput ?? null,
      stage_result_index: last,
      timestamp: child.completedAt ?? clock.now(),
      lineage_metadata: {
        type: child.lineageType,
        parent_task_id: child.parentTaskId,
        ...child.lineageMetadata,
      },
    };
    if (child.error) input.error = { code: child.error.code, message: child.error.message };
    return input;
  }

  function childSettled(run: Run, child: WorkflowTask): void {
    const parent = run.tasks.get(child.parentTaskId!);
    if (parent?.lifecycle !== 'suspended') return;
    const children = parent.childTaskIds.map((id) => run.tasks.get(id)!);
    if (children.some((candidate) => candidate.lifecycle !== 'concluded')) return;
    const inputs = children.map(mergeInputOf);
    const merges = [
      ...new Set(
        children.map((candidate) => candidate.arrivedAtMerge).filter((id): id is string => id !== undefined),
      ),
    ];
    parent.lifecycle = 'active';
    parent.updatedAt = clock.now();
    if (merges.length > 1) {
      conclude(run, parent, 'failed', {
        code: 'MERGE_CONFLICT',
        message: `the children of ${parent.taskId} reached different MERGE nodes (${merges.join(', ')}); a fan-out must join at one merge`,
      });
      return;
    }
    if (merges.length === 1) {
      run.pendingMerges.set(parent.taskId, inputs);
      run.queue.push({ task: parent, nodeId: merges[0]! });
      return;
    }
    // No merge: every child ended at an EXIT or failed. BRANCH succeeds when any clone did; SPLIT by counts.
    parent.currentOutput = inputs;
    const successes = inputs.filter((input) => input.status === 'success').length;
    const partials = inputs.filter((input) => input.status === 'partial').length;
    let state: TaskState;
    if (parent.fanOut?.role === 'branch')
      state = successes > 0 ? settledState(parent) : partials > 0 ? 'partial' : 'failed';
    else
      state =
        successes === inputs.length
          ? settledState(parent)
          : successes + partials === 0
            ? 'failed'
            : 'partial';
    conclude(
      run,
      parent,
      state,
      state === 'failed'
        ? { code: 'CHILDREN_FAILED', message: `all ${inputs.length} children of ${parent.taskId} failed` }
        : undefined,
    );
  }

  // --- stages -----------------------------------------------------------------------------------------

  const labelCache = new Map<string, Record<'node' | WorkflowOutcome, string>>();
  function metricLabels(nodeId: string): Record<'node' | WorkflowOutcome, string> {
    let labels = labelCache.get(nodeId);
    if (!labels) {
      labels = {
        node: `node=${nodeId}`,
        success: `node=${nodeId},status=success`,
        failure: `node=${nodeId},status=failure`,
        partial: `node=${nodeId},status=partial`,
      };
      labelCache.set(nodeId, labels);
    }
    return labels;
  }

  function nodeInput(task: WorkflowTask): unknown {
    return task.currentOutput !== undefined ? task.currentOutput : task.spec.input;
  }

  function stageOutputs(task: WorkflowTask): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const stage of task.history) if (stage.nodeStatus !== 'failure') out[stage.nodeId] = stage.output;
    return out;
  }

  /** The context a function or tool receives; getters make the costly parts (outputs map, files) lazy. */
  class FunctionContext implements WorkflowFunctionContext {
    private outputs: Record<string, unknown> | undefined;
    private scoped: ScopedFiles | undefined;
    private writer: WorkflowFunctionContext['memory'] | undefined;
    readonly workflowId = workflow.id;
    constructor(
      private readonly task: WorkflowTask,
      readonly nodeId: string,
      readonly context: ContextItem[],
      private readonly run: Run,
      private readonly root: string,
    ) {}
    get signal(): AbortSignal {
      return signalOf(this.run);
    }
    get taskId(): string {
      return this.task.taskId;
    }
    get spec(): TaskSpec {
      return this.task.spec;
    }
    get stageOutputs(): Record<string, unknown> {
      this.outputs ??= stageOutputs(this.task);
      return this.outputs;
    }
    get files(): ScopedFiles {
      this.scoped ??= createScopedFiles(this.root);
      return this.scoped;
    }
    get memory(): WorkflowFunctionContext['memory'] {
      const taskId = this.task.taskId;
      this.writer ??= {
        add: async (store, payload, memoryOptions = {}) => {
          await addMemory(store, payload, { ...memoryOptions, taskId });
        },
      };
      return this.writer;
    }
  }

  let memorySeq = 0;
  async function addMemory(
    store: MemoryStoreKind,
    payload: unknown,
    memoryOptions: {
      taskId?: string;
      tags?: string[];
      protected?: boolean;
      metadata?: Record<string, unknown>;
    },
  ): Promise<MemoryItem> {
    return stores[store].add({
      id: `${store}_${clock.now().toString(36)}_${(++memorySeq).toString(36)}_${idGenerator('m').slice(-6)}`,
      ...(store === 'task' && memoryOptions.taskId ? { taskId: memoryOptions.taskId } : {}),
      projectId: workflow.id,
      payload,
      tags: memoryOptions.tags ?? [],
      protected: memoryOptions.protected ?? false,
      metadata: memoryOptions.metadata ?? {},
      createdAt: clock.now(),
    });
  }

  async function invokeTool(
    run: Run,
    task: WorkflowTask,
    node: DagNode,
    toolId: string,
    input: unknown,
    calls: ToolCallRecord[],
    makeContext: (tool: LoadedTool) => WorkflowFunctionContext,
  ): Promise<
    { ok: true; value: unknown } | { ok: false; misuse: boolean; error: { code: string; message: string } }
  > {
    const startedAt = clock.now();
    const fail = (misuse: boolean, error: { code: string; message: string }) => {
      const clean = redacting ? { code: error.code, message: vault.redact(error.message) } : error;
      calls.push({
        toolId,
        input,
        status: 'failure',
        error: clean,
        misuse,
        startedAt,
        completedAt: clock.now(),
      });
      emit(run, 'tool_failed', task.taskId, node.id, { toolId, misuse, error: clean });
      return { ok: false as const, misuse, error: clean };
    };
    const tool = tools.get(toolId);
    if (!tool || !node.manifest.tools.includes(toolId)) {
      return fail(true, {
        code: 'TOOL_MISUSE',
        message: `tool "${toolId}" is not listed on node "${node.id}"`,
      });
    }
    const denial = policy.check('tool', toolId);
    if (denial) {
      emit(run, 'policy_denied', task.taskId, node.id, {
        target: 'tool',
        targetId: toolId,
        policy: denial.policy,
        reason: denial.reason,
      });
      return fail(true, {
        code: 'POLICY_DENIED',
        message: `tool "${toolId}" is denied by policy "${denial.policy}"`,
      });
    }
    const problem = tool.checkInput(input);
    if (problem)
      return fail(true, {
        code: 'TOOL_MISUSE',
        message: `tool "${toolId}" input does not match its input_schema: ${problem}`,
      });
    emit(run, 'tool_invoked', task.taskId, node.id, { toolId });
    try {
      const value = await tool.invoke!(input, makeContext(tool));
      const completedAt = clock.now();
      calls.push({ toolId, input, output: value, status: 'success', misuse: false, startedAt, completedAt });
      metricsStore.recordDuration('tool.duration_ms', `tool=${toolId}`, completedAt - startedAt);
      emit(run, 'tool_completed', task.taskId, node.id, { toolId, durationMs: completedAt - startedAt });
      artifactStore.add({
        artifactId: `${task.taskId}:${task.history.length}:tool:${calls.length - 1}`,
        rootTaskId: run.root.taskId,
        taskId: task.taskId,
        nodeId: node.id,
        type: 'tool_result',
        createdAt: completedAt,
        payload: redacting ? redactValue(value, vault) : value,
        metadata: { toolId },
      });
      return { ok: true, value };
    } catch (error) {
      const misuse =
        error instanceof ToolMisuseError || (AgentdError.isInstance(error) && error.code === 'TOOL_MISUSE');
      return fail(misuse, errorShape(error));
    }
  }

  async function runBody(
    run: Run,
    task: WorkflowTask,
    node: DagNode,
    input: unknown,
    context: ContextItem[],
    calls: ToolCallRecord[],
    merging: boolean,
  ): Promise<{ output: unknown; toolErrors: boolean }> {
    const manifest = node.manifest;
    const makeContext = (tool?: LoadedTool): WorkflowFunctionContext =>
      new FunctionContext(
        task,
        node.id,
        context,
        run,
        tool?.manifest.permissions.root ? join(workDir, tool.manifest.permissions.root) : workDir,
      );
    if (manifest.kind === 'agent') {
      const agent = agents.get(manifest.agent_id!)!;
      const agentTools: AgentToolSpec[] = manifest.tools.map((toolId) => {
        const tool = tools.get(toolId)!;
        return {
          name: toolId,
          description: tool.manifest.description ?? toolId,
          inputSchema: tool.manifest.input_schema ?? { type: 'object' },
          execute: async (args) => {
            const result = await invokeTool(run, task, node, toolId, args, calls, (bound) =>
              makeContext(bound),
            );
            if (!result.ok) throw new ToolMisuseError(result.error.message);
            return result.value;
          },
        };
      });
      const output = await runAgentNode({
        workflowId: workflow.id,
        node: manifest,
        agent,
        model: adapters.modelFor(agent.id),
        input,
        context,
        outputSchema: manifest.outputs_schema_id
          ? workflow.schemas.get(manifest.outputs_schema_id)
          : undefined,
        labels:
          node.role === 'decision' ? node.outEdges.map((edge) => (edge.label ?? edge.condition)!) : undefined,
        tools: agentTools,
        runAgentWithTools: options.runAgentWithTools,
        signal: signalOf(run),
        retry: options.modelRetry,
      });
      if (calls.some((call) => call.misuse)) {
        throw new ToolMisuseError(
          `agent node "${node.id}" misused a tool: ${calls.find((call) => call.misuse)!.error!.message}`,
        );
      }
      return { output, toolErrors: calls.some((call) => call.status === 'failure') };
    }
    const registered = functions[node.id];
    if (registered) return { output: await registered(input, makeContext()), toolErrors: false };
    if (manifest.tools.length > 0) {
      let value = input;
      let toolErrors = false;
      for (const toolId of manifest.tools) {
        const result = await invokeTool(run, task, node, toolId, value, calls, (tool) => makeContext(tool));
        if (result.ok) value = result.value;
        else if (result.misuse) throw new ToolMisuseError(result.error.message, { toolId });
        else toolErrors = true;
      }
      return { output: value, toolErrors };
    }
    if (merging) {
      // Default MERGE body: the outputs of the children that count under the failure mode, in child order.
      const inputs = (input as { merge_inputs: MergeInput[] }).merge_inputs;
      return {
        output: inputs.filter((entry) => entry.status !== 'failure').map((entry) => entry.output),
        toolErrors: false,
      };
    }
    return { output: input, toolErrors: false };
  }

  function decisionLabel(output: unknown): string | undefined {
    if (typeof output === 'object' && output !== null && !Array.isArray(output)) {
      const record = output as Record<string, unknown>;
      for (const key of ['selected_edge', 'selected_edge_label', 'condition', 'route', 'next']) {
        const value = record[key];
        if (typeof value === 'string') return value;
      }
      return undefined;
    }
    return output === undefined || output === null ? undefined : String(output);
  }

  function selectEdge(node: DagNode, label: string | undefined): WorkflowEdgeManifest | undefined {
    if (label === undefined) return undefined;
    const wanted = label.trim();
    const exact = node.outEdges.find((edge) => (edge.label ?? edge.condition) === wanted);
    if (exact) return exact;
    const lower = wanted.toLowerCase();
    return node.outEdges.find((edge) => (edge.label ?? edge.condition)!.toLowerCase() === lower);
  }

  async function executeStage(run: Run, task: WorkflowTask, node: DagNode): Promise<void> {
    const manifest = node.manifest;
    const startedAt = clock.now();
    task.lifecycle = 'active';
    if (task.state === 'pending') task.state = 'in_progress';
    task.currentStageId = node.id;
    emit(run, 'node_started', task.taskId, node.id, { role: node.role, kind: manifest.kind });

    const mergeInputs = node.role === 'merge' ? run.pendingMerges.get(task.taskId) : undefined;
    if (mergeInputs) run.pendingMerges.delete(task.taskId);
    const input = mergeInputs ? { merge_inputs: mergeInputs } : nodeInput(task);
    const calls: ToolCallRecord[] = [];
    let output: unknown;
    let error: { code: string; message: string } | undefined;
    let partial = false;
    let contextMetadata: Record<string, unknown> | undefined;
    let selected: WorkflowEdgeManifest | undefined;
    let splitItems: unknown[] | undefined;

    try {
      const nodeDenial = policy.check('node', node.id);
      if (nodeDenial) {
        emit(run, 'policy_denied', task.taskId, node.id, {
          target: 'node',
          targetId: node.id,
          policy: nodeDenial.policy,
          reason: nodeDenial.reason,
        });
        throw new UserInputError({
          code: 'POLICY_DENIED',
          message: `node "${node.id}" is denied by policy "${nodeDenial.policy}"`,
        });
      }
      let contextItems: ContextItem[] = [];
      if (manifest.context !== 'none') {
        const profile = manifest.context === 'global' ? globalProfile : profiles.get(manifest.context)!;
        const contextDenial = policy.check('context', profile.id);
        if (contextDenial) {
          emit(run, 'policy_denied', task.taskId, node.id, {
            target: 'context',
            targetId: profile.id,
            policy: contextDenial.policy,
            reason: contextDenial.reason,
          });
          emit(run, 'context_failed', task.taskId, node.id, {
            profileId: profile.id,
            reason: 'policy_denied',
          });
          throw new UserInputError({
            code: 'POLICY_DENIED',
            message: `context profile "${profile.id}" is denied by policy "${contextDenial.policy}"`,
          });
        }
        let assembled: AssembledContext;
        try {
          assembled = await assembleContext({
            profile,
            stores,
            taskId: task.taskId,
            query: typeof input === 'string' ? input : JSON.stringify(input ?? null),
          });
        } catch (contextError) {
          emit(run, 'context_failed', task.taskId, node.id, {
            profileId: profile.id,
            reason: errorShape(contextError).message,
          });
          throw contextError;
        }
        contextItems = assembled.items;
        contextMetadata = assembled.metadata as unknown as Record<string, unknown>;
        emit(run, 'context_assembled', task.taskId, node.id, contextMetadata);
      }
      if (manifest.inputs_schema_id && !mergeInputs) {
        const problem = schemaChecks.get(manifest.inputs_schema_id)!(input);
        if (problem)
          throw new UserInputError({
            code: 'INPUT_INVALID',
            message: `input of node "${node.id}" does not match ${manifest.inputs_schema_id}: ${problem}`,
          });
      }
      if (mergeInputs) {
        const failures = mergeInputs.filter((entry) => entry.status === 'failure').length;
        const mode = manifest.merge_failure_mode;
        if (mode === 'fail_on_any' && failures > 0) {
          throw new UserInputError({
            code: 'MERGE_CHILD_FAILED',
            message: `${failures} of ${mergeInputs.length} children failed (merge_failure_mode fail_on_any)`,
          });
        }
        if (failures === mergeInputs.length) {
          throw new UserInputError({
            code: 'MERGE_CHILD_FAILED',
            message: `all ${mergeInputs.length} children failed`,
          });
        }
        if (mode === 'partial' && (failures > 0 || mergeInputs.some((entry) => entry.status === 'partial')))
          partial = true;
        emit(run, 'routing_merge', task.taskId, node.id, { children: mergeInputs.length, failures, mode });
      }
      if (node.role === 'exit' || (node.role === 'merge' && !mergeInputs)) {
        // EXIT is read-only; a MERGE reached without children (e.g. after a DECISION) passes the output through.
        output = input;
      } else {
        const body = await runBody(run, task, node, input, contextItems, calls, mergeInputs !== undefined);
        output = body.output === undefined ? null : body.output;
        if (body.toolErrors) partial = true;
      }
      if (manifest.outputs_schema_id && node.role !== 'exit') {
        const problem = schemaChecks.get(manifest.outputs_schema_id)!(output);
        if (problem)
          throw new UserInputError({
            code: 'OUTPUT_INVALID',
            message: `output of node "${node.id}" does not match ${manifest.outputs_schema_id}: ${problem}`,
          });
      }
      if (node.role === 'decision') {
        const label = decisionLabel(output);
        selected = selectEdge(node, label);
        if (!selected) {
          const known = node.outEdges.map((edge) => edge.label ?? edge.condition).join(', ');
          throw new UserInputError({
            code: 'ROUTE_UNKNOWN_LABEL',
            message: `DECISION "${node.id}" selected ${label === undefined ? 'no label' : `"${label}"`}; expected one of ${known}`,
          });
        }
      } else if (node.role === 'split') {
        const items = Array.isArray(output)
          ? output
          : typeof output === 'object' &&
              output !== null &&
              Array.isArray((output as { subtask_inputs?: unknown }).subtask_inputs)
            ? (output as { subtask_inputs: unknown[] }).subtask_inputs
            : undefined;
        if (!items || items.length === 0) {
          throw new UserInputError({
            code: 'SPLIT_INVALID_OUTPUT',
            message: `SPLIT "${node.id}" must output a non-empty list or {subtask_inputs: [...]}`,
          });
        }
        splitItems = items;
      }
    } catch (caught) {
      error = errorShape(caught);
      if (run.cancelled) error = { code: ErrorCodes.aborted, message: 'the run was cancelled' };
      if (redacting) error = { code: error.code, message: vault.redact(error.message) };
    }

    const completedAt = clock.now();
    const stage: StageRecord = {
      index: task.history.length,
      nodeId: node.id,
      nodeRole: node.role,
      nodeKind: manifest.kind,
      input,
      output: error ? null : output,
      nodeStatus: error ? 'failure' : partial ? 'partial' : 'success',
      toolCalls: calls,
      contextProfileId: manifest.context,
      contextMetadata,
      startedAt,
      completedAt,
    };
    if (error) stage.error = error;
    task.history.push(stage);
    task.stageResults[node.id] = stage;
    task.updatedAt = completedAt;
    // A DECISION routes and does not transform: its verdict stays in the stage record, the payload flows on.
    if (!error && node.role !== 'decision') task.currentOutput = output;
    const labels = metricLabels(node.id);
    metricsStore.recordDuration('node.duration_ms', labels.node, completedAt - startedAt);
    metricsStore.increment('node.executions', labels[stage.nodeStatus]);
    artifactStore.add({
      artifactId: `${task.taskId}:${stage.index}`,
      rootTaskId: run.root.taskId,
      taskId: task.taskId,
      nodeId: node.id,
      type: 'node_output',
      createdAt: completedAt,
      payload: redacting ? redactValue(stage.output, vault) : stage.output,
      metadata: { status: stage.nodeStatus, role: node.role },
    });
    persist(run, (store) => store.appendStage(task, redacting ? redactValue(stage, vault) : stage));
    if (workflow.memory.taskStoreRead && !error && node.role !== 'exit') {
      await addMemory('task', output, { taskId: task.taskId, tags: [node.id, 'stage_output'] });
    }

    if (error) {
      task.failureSignatures.push(`${node.id}:${error.code}`);
      emit(run, 'node_failed', task.taskId, node.id, { error, durationMs: completedAt - startedAt });
      const canContinue =
        manifest.continue_on_failure &&
        error.code !== ErrorCodes.aborted &&
        (node.role === 'start' || node.role === 'linear' || node.role === 'merge' || node.role === 'branch');
      if (!canContinue) {
        conclude(run, task, error.code === ErrorCodes.aborted ? 'cancelled' : 'failed', {
          ...error,
          nodeId: node.id,
        });
        return;
      }
      task.toleratedFailure = true;
    } else {
      emit(run, 'node_completed', task.taskId, node.id, {
        status: stage.nodeStatus,
        durationMs: completedAt - startedAt,
      });
      if (partial) task.toleratedFailure = true;
    }
    route(run, task, node, selected, splitItems);
  }

  function advance(run: Run, task: WorkflowTask, from: DagNode, edge: WorkflowEdgeManifest): void {
    task.routingTrace.push(
      edge.label
        ? { from: from.id, to: edge.to, role: from.role, label: edge.label }
        : { from: from.id, to: edge.to, role: from.role },
    );
    const target = workflow.dag.nodes.get(edge.to)!;
    if (target.role === 'merge' && task.parentTaskId !== undefined) {
      // Inside a clone or subtask the first MERGE reached collects the child into its parent.
      task.arrivedAtMerge = target.id;
      conclude(run, task, settledState(task));
      return;
    }
    run.queue.push({ task, nodeId: edge.to });
  }

  function route(
    run: Run,
    task: WorkflowTask,
    node: DagNode,
    selected: WorkflowEdgeManifest | undefined,
    splitItems: unknown[] | undefined,
  ): void {
    switch (node.role) {
      case 'exit': {
        const state = node.manifest.always_fail ? 'failed' : settledState(task);
        conclude(
          run,
          task,
          state,
          state === 'failed' && !task.error
            ? { code: 'ALWAYS_FAIL', message: `EXIT "${node.id}" has always_fail`, nodeId: node.id }
            : undefined,
        );
        return;
      }
      case 'decision': {
        const label = (selected!.label ?? selected!.condition)!;
        emit(run, 'routing_decision', task.taskId, node.id, { label, to: selected!.to });
        advance(run, task, node, selected!);
        return;
      }
      case 'branch': {
        const clones: string[] = [];
        node.outEdges.forEach((edge, index) => {
          const clone = newTask(run, {
            taskId: `${task.taskId}-clone-${index}`,
            rootTaskId: task.rootTaskId,
            spec: task.spec,
            parentTaskId: task.taskId,
            lineageType: 'clone',
            lineageMetadata: {
              branch_label: edge.label ?? edge.to,
              cloned_at_stage: node.id,
              clone_index: index,
            },
            currentOutput: structuredClone(task.currentOutput),
            lifecycle: 'active',
          });
          task.childTaskIds.push(clone.taskId);
          clones.push(clone.taskId);
          emit(run, 'clone_created', clone.taskId, node.id, {
            parentTaskId: task.taskId,
            cloneIndex: index,
            edge: edge.to,
            label: edge.label,
          });
          persist(run, (store) => store.saveTask(cleanTask(clone)));
          task.routingTrace.push({
            from: node.id,
            to: edge.to,
            role: 'branch',
            ...(edge.label ? { label: edge.label } : {}),
            childTaskId: clone.taskId,
          });
          run.queue.push({ task: clone, nodeId: edge.to });
        });
        suspend(run, task, node, 'branch');
        emit(run, 'routing_branch', task.taskId, node.id, { clones });
        return;
      }
      case 'split': {
        const subtasks: string[] = [];
        const edges = node.outEdges;
        splitItems!.forEach((item, index) => {
          const edge = edges[index % edges.length]!;
          const subtask = newTask(run, {
            taskId: `${task.taskId}-subtask-${index}`,
            rootTaskId: task.rootTaskId,
            spec: {
              ...task.spec,
              taskSpecId: `${task.spec.taskSpecId}-subtask-${index}`,
              request: typeof item === 'string' ? item : JSON.stringify(item),
              input: item,
            },
            parentTaskId: task.taskId,
            lineageType: 'subtask',
            lineageMetadata: {
              split_edge_label: edge.label ?? edge.to,
              split_at_stage: node.id,
              subtask_index: index,
              subtask_input: item,
            },
            lifecycle: 'active',
          });
          task.childTaskIds.push(subtask.taskId);
          subtasks.push(subtask.taskId);
          emit(run, 'subtask_created', subtask.taskId, node.id, {
            parentTaskId: task.taskId,
            subtaskIndex: index,
            edge: edge.to,
          });
          persist(run, (store) => store.saveTask(cleanTask(subtask)));
          task.routingTrace.push({
            from: node.id,
            to: edge.to,
            role: 'split',
            ...(edge.label ? { label: edge.label } : {}),
            childTaskId: subtask.taskId,
          });
          run.queue.push({ task: subtask, nodeId: edge.to });
        });
        suspend(run, task, node, 'split');
        emit(run, 'routing_split', task.taskId, node.id, { subtasks });
        return;
      }
      default:
        advance(run, task, node, node.outEdges[0]!);
    }
  }

  function suspend(run: Run, task: WorkflowTask, node: DagNode, role: 'branch' | 'split'): void {
    task.fanOut = { nodeId: node.id, role };
    task.lifecycle = 'suspended';
    persist(run, (store) => store.saveTask(cleanTask(task)));
  }

  // --- runs -------------------------------------------------------------------------------------------

  function signalOf(run: Run): AbortSignal {
    run.controller ??= new AbortController();
    if (run.cancelled && !run.controller.signal.aborted) run.controller.abort();
    return run.controller.signal;
  }

  function abortRun(run: Run, reason: unknown): void {
    run.cancelled = true;
    run.controller?.abort(reason);
  }

  async function execute(run: Run): Promise<'completed' | 'failed'> {
    const { root } = run;
    root.lifecycle = 'active';
    root.state = 'in_progress';
    emit(run, 'task_started', root.taskId, undefined, {
      startNodeId: run.startNodeId,
      request: root.spec.request,
    });
    persist(run, (store) => store.saveTask(cleanTask(root)));
    run.queue.push({ task: root, nodeId: run.startNodeId });
    try {
      while (run.head < run.queue.length) {
        const item = run.queue[run.head]!;
        run.queue[run.head++] = undefined;
        if (run.cancelled) break;
        if (item.task.lifecycle === 'concluded') continue;
        await executeStage(run, item.task, workflow.dag.nodes.get(item.nodeId)!);
      }
      if (run.cancelled) {
        for (const task of run.tasks.values()) {
          if (task.lifecycle !== 'concluded')
            conclude(run, task, 'cancelled', { code: ErrorCodes.aborted, message: 'the run was cancelled' });
        }
      } else if (run.root.lifecycle !== 'concluded') {
        // Only reachable through a defect: the queue drained with the root still open.
        conclude(run, root, 'failed', {
          code: ErrorCodes.internal,
          message: 'the run ended without reaching an EXIT',
        });
      }
    } catch (error) {
      logger.error({ err: error, rootTaskId: root.taskId }, 'workflow run crashed');
      for (const task of run.tasks.values()) {
        if (task.lifecycle !== 'concluded')
          conclude(run, task, 'failed', { code: ErrorCodes.internal, message: errorShape(error).message });
      }
    }
    finishRun(run);
    return run.root.state === 'failed' || run.root.state === 'cancelled' ? 'failed' : 'completed';
  }

  function finishRun(run: Run): void {
    const { root } = run;
    run.finished = true;
    const counts: Record<string, number> = {};
    for (const event of run.events) counts[event.type] = (counts[event.type] ?? 0) + 1;
    artifactStore.add({
      artifactId: `${root.taskId}:telemetry`,
      rootTaskId: root.taskId,
      taskId: root.taskId,
      nodeId: undefined,
      type: 'telemetry_snapshot',
      createdAt: clock.now(),
      payload: { eventCounts: counts, events: run.events.length },
      metadata: { ...workflow.metadata },
    });
    metricsStore.increment('task.completions', `status=${outcomeOf(root.state)}`);
    if (records) {
      const events = run.events.slice();
      const artifacts = artifactStore.forRun(root.taskId);
      persist(run, (store) => store.saveRunRecords(root.taskId, events, artifacts));
    }
    const result: WorkflowRunResult = {
      taskId: root.taskId,
      workflowId: workflow.id,
      status: outcomeOf(root.state) ?? 'failure',
      state: root.state,
      output: redacting ? redactValue(root.currentOutput ?? null, vault) : (root.currentOutput ?? null),
      stagesExecuted: [...run.tasks.values()].reduce((sum, task) => sum + task.history.length, 0),
      childTaskIds: root.childTaskIds.slice(),
      startedAt: root.createdAt,
      completedAt: root.completedAt ?? clock.now(),
      metadata: workflow.metadata,
    };
    if (root.error) result.error = root.error;
    finishedOrder.push(root.taskId);
    while (finishedOrder.length > retainRuns) {
      const evicted = finishedOrder.shift()!;
      const old = runs.get(evicted);
      if (!old) continue;
      runs.delete(evicted);
      for (const taskId of old.tasks.keys()) taskIndex.delete(taskId);
      artifactStore.forget(evicted);
    }
    // Resolve after the run's records are written, so `inspect` from the database sees the whole run.
    run.persistQueue.then(() => run.resolve(result));
  }

  function startRun(input: unknown, runOptions: RunOptions): Run {
    const startNodeId = runOptions.startNodeId ?? workflow.dag.defaultStartId!;
    const startNode = workflow.dag.nodes.get(startNodeId);
    if (startNode?.role !== 'start') {
      throw new UserInputError({
        code: ErrorCodes.invalidRequest,
        message: `"${startNodeId}" is not a START node of workflow "${workflow.id}"`,
      });
    }
    const taskId = runOptions.taskId ?? idGenerator('wft');
    if (taskIndex.has(taskId))
      throw new UserInputError({
        code: ErrorCodes.conflict,
        message: `a task with id ${taskId} already exists`,
      });
    const spec: TaskSpec = {
      taskSpecId: taskId,
      request: normalizeRequest(input),
      input,
      mode: runOptions.spec?.mode ?? 'implement',
      priority: runOptions.spec?.priority ?? 'normal',
      hints: runOptions.spec?.hints ?? [],
      files: runOptions.spec?.files ?? [],
      overrides: runOptions.spec?.overrides ?? [],
      metadata: runOptions.spec?.metadata ?? {},
    };
    let resolve!: (result: WorkflowRunResult) => void;
    const result = new Promise<WorkflowRunResult>((settle) => {
      resolve = settle;
    });
    const run: Run = {
      root: undefined as unknown as WorkflowTask,
      tasks: new Map(),
      events: [],
      seq: 0,
      controller: undefined,
      cancelled: false,
      queue: [],
      head: 0,
      pendingMerges: new Map(),
      startNodeId,
      finished: false,
      resolve,
      result,
      persistQueue: Promise.resolve(),
    };
    run.root = newTask(run, { taskId, rootTaskId: taskId, spec });
    runs.set(taskId, run);
    if (runOptions.signal) {
      if (runOptions.signal.aborted) abortRun(run, runOptions.signal.reason);
      else
        runOptions.signal.addEventListener('abort', () => abortRun(run, runOptions.signal!.reason), {
          once: true,
        });
    }
    return run;
  }

  function enqueue(
    input: unknown,
    runOptions: RunOptions = {},
  ): { taskId: string; result: Promise<WorkflowRunResult> } {
    const run = startRun(input, runOptions);
    try {
      const taskId = run.root.taskId;
      const dispatch = options.dispatch;
      executor.submit({
        taskId,
        run: dispatch ? () => dispatch(taskId, () => execute(run)) : () => execute(run),
      });
    } catch (error) {
      runs.delete(run.root.taskId);
      taskIndex.delete(run.root.taskId);
      throw error;
    }
    metricsStore.setGauge('queue.depth', executor.queueDepth);
    return { taskId: run.root.taskId, result: run.result };
  }

  async function inspectTask(taskId: string): Promise<InspectionReport | undefined> {
    const run = taskIndex.get(taskId);
    if (run) {
      return buildInspection({
        taskId,
        tasks: [...run.tasks.values()],
        events: run.events,
        artifacts: artifactStore.forRun(run.root.taskId),
        metadata: workflow.metadata,
      });
    }
    const persisted = records ? await records.loadRun(taskId) : undefined;
    return persisted ? buildInspection({ taskId, ...persisted, metadata: workflow.metadata }) : undefined;
  }

  function cancelRun(taskId: string): boolean {
    const run = taskIndex.get(taskId);
    if (!run || run.finished) return false;
    if (executor.withdraw(run.root.taskId)) {
      // Never started: conclude it here so its result settles.
      for (const task of run.tasks.values())
        conclude(run, task, 'cancelled', {
          code: ErrorCodes.aborted,
          message: 'the run was cancelled before it started',
        });
      finishRun(run);
      return true;
    }
    abortRun(run, new UserInputError({ code: ErrorCodes.aborted, message: 'the run was cancelled' }));
    return true;
  }

  return {
    workflow,
    metadata: workflow.metadata,
    run: async (input, runOptions = {}) => enqueue(input, runOptions).result,
    enqueue,
    async runQueued() {
      executor.resume();
      await executor.drain();
    },
    pauseQueue: () => executor.pause(),
    queueStatus() {
      const tasks: QueueStatus['tasks'] = [];
      for (const taskId of runs.keys()) {
        const state = executor.stateOf(taskId);
        if (state) tasks.push({ taskId, state });
      }
      return {
        enabled: schedulerConfig.enabled,
        queued: executor.queueDepth,
        running: executor.running,
        paused: executor.paused,
        maxConcurrency: schedulerConfig.max_concurrency,
        maxQueueSize: schedulerConfig.max_queue_size,
        tasks,
      };
    },
    status(taskId) {
      const task = taskIndex.get(taskId)?.tasks.get(taskId);
      return task ? statusViewOf(task) : undefined;
    },
    cancel: (taskId) => cancelRun(taskId),
    async inspect(taskId) {
      const report = await inspectTask(taskId);
      return report && redacting ? redactValue(report, vault) : report;
    },
    runEvaluations: (evaluationOptions = {}) =>
      runEvaluationSuites({
        workflow,
        run: (input) => enqueue(input).result,
        assertions: options.assertions ?? {},
        schemaChecks,
        baselinePath:
          evaluationOptions.baselinePath ??
          (options.stateDir ? join(options.stateDir, 'evaluations', 'baseline.json') : undefined),
        ...(evaluationOptions.suites ? { suites: evaluationOptions.suites } : {}),
        now: () => clock.now(),
      }),
    subscribe(listener) {
      listeners.push(listener);
      return () => {
        const index = listeners.indexOf(listener);
        if (index >= 0) listeners.splice(index, 1);
      };
    },
    artifacts: (query) => artifactStore.query(query),
    memory: {
      add: (store, payload, memoryOptions = {}) => addMemory(store, payload, memoryOptions),
      list: (store, filter = {}) => stores[store].list(filter),
    },
    metrics: () => metricsStore.snapshot(),
    adapters: () => adapters.list(),
    credentials: () => vault.list(),
    async close() {
      executor.pause();
      for (const run of [...runs.values()]) if (!run.finished) cancelRun(run.root.taskId);
      await executor.drain();
      await Promise.all([...runs.values()].map((run) => run.persistQueue));
      await plugins.shutdown();
      if (ownsDatabase) await database!.close();
    },
  };
}
