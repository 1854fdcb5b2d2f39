import type { Artifact } from './artifacts.js';
import type { WorkflowMetadata } from './loader.js';
import {
  outcomeOf,
  type RoutingStep,
  type StageRecord,
  statusViewOf,
  type TaskStatusView,
  type WorkflowTask,
} from './task.js';
import type { TelemetryEvent } from './telemetry.js';

export interface InspectionSummary {
  workflowId: string;
  rootTaskId: string;
  status: TaskStatusView['status'];
  /** Tasks in the run: the root plus every clone and subtask. */
  tasks: number;
  stagesExecuted: number;
  failedStages: Array<{ taskId: string; nodeId: string; code: string; message: string }>;
  /** Node ids in execution order for the inspected task. */
  path: string[];
  durationMs: number | undefined;
  eventCounts: Record<string, number>;
}

/** Everything known about one task and the run it belongs to (`agentd inspect`). */
export interface InspectionReport {
  task: TaskStatusView & {
    spec: WorkflowTask['spec'];
    lineageType: WorkflowTask['lineageType'];
    lineageMetadata: WorkflowTask['lineageMetadata'];
  };
  history: StageRecord[];
  routingTrace: RoutingStep[];
  output: unknown;
  /** Every task of the run with its lineage, root first. */
  lineage: Array<TaskStatusView & { lineageType: WorkflowTask['lineageType'] }>;
  events: TelemetryEvent[];
  artifacts: Artifact[];
  summary: InspectionSummary;
  metadata: WorkflowMetadata;
}

export function buildInspection(input: {
  taskId: string;
  tasks: ReadonlyArray<WorkflowTask>;
  events: ReadonlyArray<TelemetryEvent>;
  artifacts: ReadonlyArray<Artifact>;
  metadata: WorkflowMetadata;
}): InspectionReport | undefined {
  const task = input.tasks.find((candidate) => candidate.taskId === input.taskId);
  if (!task) return undefined;
  const root = input.tasks.find((candidate) => candidate.taskId === task.rootTaskId) ?? task;
  const eventCounts: Record<string, number> = {};
  for (const event of input.events) eventCounts[event.type] = (eventCounts[event.type] ?? 0) + 1;
  const failedStages = input.tasks.flatMap((candidate) =>
    candidate.history
      .filter((stage) => stage.nodeStatus === 'failure')
      .map((stage) => ({
        taskId: candidate.taskId,
        nodeId: stage.nodeId,
        code: stage.error?.code ?? 'UNKNOWN',
        message: stage.error?.message ?? '',
      })),
  );
  return {
    task: {
      ...statusViewOf(task),
      spec: task.spec,
      lineageType: task.lineageType,
      lineageMetadata: task.lineageMetadata,
    },
    history: task.history.slice(),
    routingTrace: task.routingTrace.slice(),
    output: task.currentOutput ?? null,
    lineage: input.tasks.map((candidate) => ({
      ...statusViewOf(candidate),
      lineageType: candidate.lineageType,
    })),
    events: input.events.filter((event) => event.taskId === task.taskId || task.taskId === root.taskId),
    artifacts: input.artifacts.filter(
      (artifact) => artifact.taskId === task.taskId || task.taskId === root.taskId,
    ),
    summary: {
      workflowId: root.workflowId,
      rootTaskId: root.taskId,
      status: outcomeOf(task.state),
      tasks: input.tasks.length,
      stagesExecuted: input.tasks.reduce((sum, candidate) => sum + candidate.history.length, 0),
      failedStages,
      path: task.history.map((stage) => stage.nodeId),
      durationMs: task.completedAt === undefined ? undefined : task.completedAt - task.createdAt,
      eventCounts,
    },
    metadata: input.metadata,
  };
}

/** Builds the report of a run read back from a record store (e.g. `agentd inspect` in another process). */
export async function inspectPersistedRun(
  store: {
    loadRun(
      taskId: string,
    ): Promise<{ tasks: WorkflowTask[]; events: TelemetryEvent[]; artifacts: Artifact[] } | undefined>;
  },
  taskId: string,
): Promise<InspectionReport | undefined> {
  const run = await store.loadRun(taskId);
  if (!run) return undefined;
  const snapshot = run.artifacts.find((artifact) => artifact.type === 'telemetry_snapshot');
  const metadata = (snapshot?.metadata ?? {
    workflowId: run.tasks[0]?.workflowId ?? 'unknown',
    workflowVersion: 'unknown',
    engineVersion: 'unknown',
    schemaVersion: 'unknown',
    manifestHashes: {},
  }) as unknown as WorkflowMetadata;
  return buildInspection({ taskId, ...run, metadata });
}
