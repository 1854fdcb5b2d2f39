export {
  type AdapterMetadata,
  type AdapterRegistry,
  createAdapterRegistry,
  type WorkflowModelResolver,
} from './adapters.js';
export type {
  AgentToolSpec,
  RunAgentWithTools,
  RunAgentWithToolsOptions,
  RunAgentWithToolsResult,
} from './agent-node.js';
export type { Artifact, ArtifactQuery, ArtifactType } from './artifacts.js';
export { type AssembledContext, assembleContext, type ContextItem, type ContextMetadata } from './context.js';
export {
  type CredentialMetadata,
  type CredentialVault,
  loadCredentials,
  redactedMarker,
} from './credentials.js';
export type { DagNode, WorkflowDag } from './dag.js';
export {
  type CreateWorkflowEngineOptions,
  createWorkflowEngine,
  type QueueStatus,
  type RunOptions,
  type WorkflowEngine,
  type WorkflowRunResult,
} from './engine/index.js';
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
export { type InspectionReport, type InspectionSummary, inspectPersistedRun } from './inspector.js';
export {
  type LoadedWorkflow,
  type LoadWorkflowOptions,
  loadWorkflow,
  type WorkflowMetadata,
  workflowEngineVersion,
  workflowSchemaVersion,
} from './loader.js';
export {
  type CliProfile,
  type ContextProfile,
  type MergeFailureMode,
  manifestFiles,
  type NodeKind,
  type NodeRole,
  type WorkflowManifests,
} from './manifest-schemas.js';
export {
  createInMemoryStore,
  createSqlMemoryStore,
  type MemoryStore,
  type MemoryStoreKind,
  type WorkflowMemoryItem,
} from './memory-store.js';
export type { MetricsSnapshot } from './metrics.js';
export {
  createSqlRecordStore,
  type PersistedRun,
  type WorkflowRecordStore,
  type WorkflowRecordWriter,
} from './record-store.js';
export { type ReplIo, type ReplOptions, runWorkflowRepl } from './repl.js';
export {
  createFifoExecutor,
  type JobHandle,
  type ScheduledJob,
  type ScheduledTaskState,
  type TaskExecutor,
} from './scheduler.js';
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
  schedulerEventTypes,
  type TelemetryEvent,
  type TelemetryEventType,
  telemetryEventTypes,
  type WorkflowBusEventData,
  type WorkflowBusEventType,
  type WorkflowPlugin,
} from './telemetry.js';
export {
  type ScopedFiles,
  ToolMisuseError,
  type WorkflowFunction,
  type WorkflowFunctionContext,
} from './tools.js';
export {
  type ValidateWorkflowOptions,
  type WorkflowIssue,
  WorkflowValidationError,
} from './validate.js';
