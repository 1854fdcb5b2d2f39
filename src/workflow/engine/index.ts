export { createWorkflowEngine } from './create-engine.js';
export type {
  CreateWorkflowEngineOptions,
  QueueStatus,
  RunOptions,
  WorkflowEngine,
  WorkflowRunResult,
} from './types.js';
