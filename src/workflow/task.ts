import type { NodeKind, NodeRole } from './manifest-schemas.js';

/** The seven internal states (the original's `UniversalStatus`). */
export const taskStates = [
  'pending',
  'in_progress',
  'completed',
  'failed',
  'partial',
  'cancelled',
  'blocked',
] as const;
export type TaskState = (typeof taskStates)[number];
/** Where a task is in its life, independent of how it is doing. */
export const taskLifecycles = ['queued', 'active', 'suspended', 'concluded', 'archived'] as const;
export type TaskLifecycle = (typeof taskLifecycles)[number];
/** The three-value status of the API (tools, nodes and tasks). */
export type WorkflowOutcome = 'success' | 'failure' | 'partial';

/** The states a task ends in (those `outcomeOf` maps to a status); the task's `completedAt` is set with it. */
export const endedTaskStates: ReadonlyArray<TaskState> = [
  'completed',
  'partial',
  'failed',
  'cancelled',
  'blocked',
];

/** Maps an internal state to the API status; `undefined` while the task is still open. */
export function outcomeOf(state: TaskState): WorkflowOutcome | undefined {
  switch (state) {
    case 'completed':
      return 'success';
    case 'partial':
      return 'partial';
    case 'failed':
    case 'cancelled':
    case 'blocked':
      return 'failure';
    default:
      return undefined;
  }
}

export interface TaskSpec {
  taskSpecId: string;
  /** The request as text (the input itself when it is a string, else its `request` field or its JSON). */
  request: string;
  /** The input exactly as given to `run`; the first node receives it. */
  input: unknown;
  mode: 'analysis_only' | 'implement' | 'review' | 'dry_run';
  priority: 'low' | 'normal' | 'high';
  hints: string[];
  files: string[];
  overrides: string[];
  metadata: Record<string, unknown>;
}

/** What a spec may leave to its defaults: a run's options, and a stored task record (record version 5). */
export type SpecOptions = Partial<
  Pick<TaskSpec, 'mode' | 'priority' | 'hints' | 'files' | 'overrides' | 'metadata'>
>;
export const defaultSpecMode: TaskSpec['mode'] = 'implement';
export const defaultSpecPriority: TaskSpec['priority'] = 'normal';

/** A spec with `options`' fields; those it leaves out take their defaults (`implement`, `normal`, empty). */
export function specWithDefaults(
  taskSpecId: string,
  request: string,
  input: unknown,
  options: SpecOptions,
): TaskSpec {
  return {
    taskSpecId,
    request,
    input,
    mode: options.mode ?? defaultSpecMode,
    priority: options.priority ?? defaultSpecPriority,
    hints: options.hints ?? [],
    files: options.files ?? [],
    overrides: options.overrides ?? [],
    metadata: options.metadata ?? {},
  };
}

export interface ToolCallRecord {
  toolId: string;
  input: unknown;
  output?: unknown;
  status: WorkflowOutcome;
  error?: { code: string; message: string };
  misuse: boolean;
  startedAt: number;
  completedAt: number;
}

/** One executed node of one task (the original's StageExecutionRecord). */
export interface StageRecord {
  index: number;
  nodeId: string;
  nodeRole: NodeRole;
  nodeKind: NodeKind;
  input: unknown;
  output: unknown;
  error?: { code: string; message: string };
  nodeStatus: WorkflowOutcome;
  toolCalls: ToolCallRecord[];
  contextProfileId: string;
  contextMetadata: Record<string, unknown> | undefined;
  startedAt: number;
  completedAt: number;
}

export interface RoutingStep {
  from: string;
  to: string;
  role: NodeRole;
  /** The selected label (DECISION), the edge label (BRANCH/SPLIT), or undefined. */
  label?: string;
  /** For BRANCH/SPLIT: the clone or subtask that took this edge. */
  childTaskId?: string;
}

export const lineageTypes = ['clone', 'subtask'] as const;
export type LineageType = (typeof lineageTypes)[number];

export interface WorkflowTask {
  taskId: string;
  /** The task `run` created; equal to taskId for it. */
  rootTaskId: string;
  workflowId: string;
  spec: TaskSpec;
  lifecycle: TaskLifecycle;
  state: TaskState;
  currentStageId: string | undefined;
  /** Output of the last executed node; `undefined` before the first. */
  currentOutput: unknown;
  history: StageRecord[];
  routingTrace: RoutingStep[];
  /** `<node id>:<error code>` for every failed stage, the basis of regression comparisons. */
  failureSignatures: string[];
  parentTaskId: string | undefined;
  lineageType: LineageType | undefined;
  lineageMetadata: Record<string, unknown> | undefined;
  childTaskIds: string[];
  /** The node whose role created the children this task waits for (BRANCH or SPLIT). */
  fanOut: { nodeId: string; role: 'branch' | 'split' } | undefined;
  /** For a child: the MERGE node it reached, which collects it into its parent. */
  arrivedAtMerge: string | undefined;
  /** A stage failed but `continue_on_failure` let the task go on: it can end partial at best. */
  toleratedFailure: boolean;
  error: { code: string; message: string; nodeId?: string } | undefined;
  createdAt: number;
  updatedAt: number;
  completedAt: number | undefined;
}

/** The view `status(taskId)` returns: enough to poll a run, cheap to produce. */
export interface TaskStatusView {
  taskId: string;
  rootTaskId: string;
  lifecycle: TaskLifecycle;
  state: TaskState;
  /** Set once the task has concluded. */
  status: WorkflowOutcome | undefined;
  currentStageId: string | undefined;
  parentTaskId: string | undefined;
  childTaskIds: string[];
  stagesExecuted: number;
  error: { code: string; message: string; nodeId?: string } | undefined;
  createdAt: number;
  completedAt: number | undefined;
}

export function statusViewOf(task: WorkflowTask): TaskStatusView {
  return {
    taskId: task.taskId,
    rootTaskId: task.rootTaskId,
    lifecycle: task.lifecycle,
    state: task.state,
    status:
      task.lifecycle === 'concluded' || task.lifecycle === 'archived' ? outcomeOf(task.state) : undefined,
    currentStageId: task.currentStageId,
    parentTaskId: task.parentTaskId,
    childTaskIds: task.childTaskIds.slice(),
    stagesExecuted: task.history.length,
    error: task.error,
    createdAt: task.createdAt,
    completedAt: task.completedAt,
  };
}
