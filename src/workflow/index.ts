import type { CreateWorkflowEngineOptions, WorkflowEngine } from './engine/index.js';
import type { LoadedWorkflow, LoadWorkflowOptions } from './loader.js';

export type { AdapterMetadata, AdapterRegistry, WorkflowModelResolver } from './adapters.js';
export type {
  AgentToolSpec,
  RunAgentWithTools,
  RunAgentWithToolsOptions,
  RunAgentWithToolsResult,
} from './agent-node.js';
export type { Artifact, ArtifactQuery, ArtifactType } from './artifacts.js';
export type { AssembledContext, ContextItem, ContextMetadata } from './context.js';
export type { CredentialMetadata, CredentialVault } from './credentials.js';
export type { DagNode, WorkflowDag } from './dag.js';
// The engine's types; its `createWorkflowEngine` is the function below, which loads the engine first.
export type * from './engine/index.js';
export type {
  AssertionResult,
  CaseResult,
  CustomAssertion,
  CustomAssertionInput,
  EvaluationReport,
} from './evaluation.js';
export {
  createWorkflowMethodHandlers,
  type WorkflowMethodHandlers,
  workflowCancelParamsSchema,
  workflowRunParamsSchema,
  workflowStatusParamsSchema,
} from './gateway-methods.js';
export type { InspectionReport, InspectionSummary } from './inspector.js';
export type { LoadedWorkflow, LoadWorkflowOptions, WorkflowMetadata } from './loader.js';
export type {
  CliProfile,
  ContextProfile,
  MergeFailureMode,
  NodeKind,
  NodeRole,
  WorkflowManifests,
} from './manifest-schemas.js';
export type { MemoryStore, MemoryStoreKind, WorkflowMemoryItem } from './memory-store.js';
export type { MetricsSnapshot } from './metrics.js';
export type { PersistedRun, WorkflowRecordStore, WorkflowRecordWriter } from './record-store.js';
export type { ReplIo, ReplOptions } from './repl.js';
export {
  createWorkflowRetention,
  type PrunedWorkflowRuns,
  type WorkflowRetention,
  type WorkflowRetentionOptions,
} from './retention.js';
export {
  concludeInterruptedRuns,
  createInterruptedRunSweep,
  createRunOwner,
  type RunOwner,
  type RunOwnerOptions,
} from './run-owners.js';
export type { JobHandle, ScheduledJob, ScheduledTaskState, TaskExecutor } from './scheduler.js';
export type {
  StageRecord,
  TaskLifecycle,
  TaskSpec,
  TaskState,
  TaskStatusView,
  WorkflowOutcome,
  WorkflowTask,
} from './task.js';
export {
  busEventTypeOf,
  type TelemetryEvent,
  type TelemetryEventType,
  telemetryEventTypes,
  type WorkflowBusEventData,
  type WorkflowBusEventType,
  type WorkflowPlugin,
} from './telemetry.js';
export type { ScopedFiles, WorkflowFunction, WorkflowFunctionContext } from './tools.js';
export type { ValidateWorkflowOptions, WorkflowIssue, WorkflowValidationError } from './validate.js';

/**
 * The engine, the loader, the validator, the record store and the REPL, loaded on first use: the runtime
 * registers the workflow methods with what is above and loads these with the first workflow it runs.
 */
export const loadWorkflowEngine = () => import('./engine-entry.js');

/** `loadWorkflow` of the loader (see `loadWorkflowEngine`). */
export async function loadWorkflow(dir: string, options?: LoadWorkflowOptions): Promise<LoadedWorkflow> {
  return (await loadWorkflowEngine()).loadWorkflow(dir, options);
}

/** `createWorkflowEngine` of the engine (see `loadWorkflowEngine`). */
export async function createWorkflowEngine(options: CreateWorkflowEngineOptions): Promise<WorkflowEngine> {
  return (await loadWorkflowEngine()).createWorkflowEngine(options);
}
