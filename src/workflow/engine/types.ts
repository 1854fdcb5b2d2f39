import type { ModelRetryOptions } from '../../model/index.js';
import type { SqlDatabase } from '../../store/index.js';
import type { Clock, IdGenerator, Logger } from '../../util/index.js';
import type { AdapterMetadata, WorkflowModelResolver } from '../adapters.js';
import type { RunAgentWithTools } from '../agent-node.js';
import type { Artifact, ArtifactQuery } from '../artifacts.js';
import type { CredentialMetadata } from '../credentials.js';
import type { CustomAssertion, EvaluationReport } from '../evaluation.js';
import type { InspectionReport } from '../inspector.js';
import type { LoadedWorkflow, WorkflowMetadata } from '../loader.js';
import type { MemoryStoreKind, WorkflowMemoryItem } from '../memory-store.js';
import type { MetricsSnapshot } from '../metrics.js';
import type { RunOwner } from '../run-owners.js';
import type { ScheduledTaskState, TaskExecutor } from '../scheduler.js';
import type { TaskSpec, TaskState, TaskStatusView, WorkflowOutcome } from '../task.js';
import type { TelemetryListener, WorkflowBusEventData, WorkflowBusEventType } from '../telemetry.js';
import type { WorkflowFunction } from '../tools.js';

export interface CreateWorkflowEngineOptions {
  workflow: LoadedWorkflow;
  /** `provider/model` → LanguageModel; needed by agent nodes. The runtime passes the model registry's. */
  resolveModel?: WorkflowModelResolver;
  /**
   * The platform's database (the runtime's store, migrated by whoever opened it): run records and `sqlite`
   * memory stores live there. The engine never opens or migrates a database of its own.
   */
  database?: SqlDatabase;
  /** Where the REPL keeps its history and evaluations their baseline. Nothing else is written there. */
  stateDir?: string;
  /** Persist every stage record, task, event and artifact. Default: true when `database` is given. */
  durable?: boolean;
  /**
   * The lease under which this process writes its durable runs (`createRunOwner` on the same database); the
   * runtime shares one among its engines and sweeps for interrupted runs itself. Default: the engine's own,
   * given up by `close()`, and a sweep when the engine is created (docs/workflows.md, "Interrupted runs").
   */
  runOwner?: RunOwner;
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
   * item). Without it the scheduler calls the run directly. `signal` aborts when the run is cancelled
   * (`cancel`, its `RunOptions.signal`, `close`). A rejection before `execute` was called ends the run without
   * running it — `cancelled` when the error's code is ABORTED, else `failed` with the error — and frees its
   * slot; a dispatch must settle, or the run and its slot wait for ever. The signal given to `execute` is the
   * executor's (the work item's, aborted when it is cancelled while a worker runs it): its abort cancels the
   * executing run as `cancel` does, and the engine stops listening to it when the run ends.
   */
  dispatch?: (
    taskId: string,
    execute: (signal?: AbortSignal) => Promise<'completed' | 'failed'>,
    signal: AbortSignal,
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
  /**
   * Present when some of the run's records could not be written to the database (a full disk): the run
   * ended as `status` says, but the database does not hold all of it. `code` is RECORDS_NOT_WRITTEN;
   * `cause` the store's error code (STORE_UNAVAILABLE).
   */
  recordsNotWritten?: { code: string; message: string; failedWrites: number; cause: string };
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
    ): Promise<WorkflowMemoryItem>;
    list(store: MemoryStoreKind, filter?: { taskId?: string }): Promise<WorkflowMemoryItem[]>;
  };
  metrics(): MetricsSnapshot;
  adapters(): AdapterMetadata[];
  credentials(): CredentialMetadata[];
  close(): Promise<void>;
}
