import { z } from 'zod';
import { decodeJson, versioned } from '../util/index.js';
import type { Artifact } from './artifacts.js';
import { nodeKinds, nodeRoles } from './manifest-schemas.js';
import type { StageRecord, WorkflowTask } from './task.js';
import { schedulerEventTypes, type TelemetryEvent, telemetryEventTypes } from './telemetry.js';

/**
 * Persisted workflow JSON — task records, stage records and events — carries `schemaVersion`. Version 1 is
 * the first to say so; records written before (version 0) have the same fields and read as version 1. A
 * change of shape adds version 2 here with an upgrade from 1, and `scripts/workflow-record-fixtures.ts`
 * then writes the version-2 file of the corpus in test/fixtures/workflow-records that every test run reads.
 */
export const workflowRecordVersion = 1;

const outcome = z.enum(['success', 'failure', 'partial']);
const errorShape = z.object({ code: z.string(), message: z.string() });
const taskError = errorShape.extend({ nodeId: z.string().optional() });
const jsonObject = z.record(z.string(), z.unknown());

const toolCallSchema = z.object({
  toolId: z.string(),
  input: z.unknown(),
  output: z.unknown().optional(),
  status: outcome,
  error: errorShape.optional(),
  misuse: z.boolean(),
  startedAt: z.number(),
  completedAt: z.number(),
});

const stageSchema = z.object({
  index: z.number().int().min(0),
  nodeId: z.string(),
  nodeRole: z.enum(nodeRoles),
  nodeKind: z.enum(nodeKinds),
  input: z.unknown(),
  output: z.unknown(),
  error: errorShape.optional(),
  nodeStatus: outcome,
  toolCalls: z.array(toolCallSchema),
  contextProfileId: z.string(),
  contextMetadata: jsonObject.optional(),
  startedAt: z.number(),
  completedAt: z.number(),
});

const taskSpecSchema = z.object({
  taskSpecId: z.string(),
  request: z.string(),
  input: z.unknown(),
  mode: z.enum(['analysis_only', 'implement', 'review', 'dry_run']),
  priority: z.enum(['low', 'normal', 'high']),
  hints: z.array(z.string()),
  files: z.array(z.string()),
  overrides: z.array(z.string()),
  metadata: jsonObject,
});

/** The task row's record: the task without its history, which lives in the stage rows. */
const taskSchema = z.object({
  taskId: z.string(),
  rootTaskId: z.string(),
  workflowId: z.string(),
  spec: taskSpecSchema,
  lifecycle: z.enum(['queued', 'active', 'suspended', 'concluded', 'archived']),
  state: z.enum(['pending', 'in_progress', 'completed', 'failed', 'partial', 'cancelled', 'blocked']),
  currentStageId: z.string().optional(),
  currentOutput: z.unknown(),
  routingTrace: z.array(
    z.object({
      from: z.string(),
      to: z.string(),
      role: z.enum(nodeRoles),
      label: z.string().optional(),
      childTaskId: z.string().optional(),
    }),
  ),
  failureSignatures: z.array(z.string()),
  parentTaskId: z.string().optional(),
  lineageType: z.enum(['clone', 'subtask']).optional(),
  lineageMetadata: jsonObject.optional(),
  childTaskIds: z.array(z.string()),
  fanOut: z.object({ nodeId: z.string(), role: z.enum(['branch', 'split']) }).optional(),
  arrivedAtMerge: z.string().optional(),
  toleratedFailure: z.boolean(),
  error: taskError.optional(),
  createdAt: z.number(),
  updatedAt: z.number(),
  completedAt: z.number().optional(),
});

const eventSchema = z.object({
  eventId: z.string(),
  rootTaskId: z.string(),
  taskId: z.string(),
  stageId: z.string().optional(),
  type: z.enum([...telemetryEventTypes, ...schedulerEventTypes]),
  timestamp: z.number(),
  payload: jsonObject,
  metadata: z.object({ workflowId: z.string() }),
});

// Version 0 → 1 only added the version field itself, so no upgrade function is needed.
const storedStage = versioned(workflowRecordVersion, stageSchema);
const storedTask = versioned(workflowRecordVersion, taskSchema);
const storedEvent = versioned(workflowRecordVersion, eventSchema);

const versionPrefix = `{"schemaVersion":${workflowRecordVersion}`;
/**
 * `{schemaVersion, ...record}` as JSON without building that copy of the record: the version key is
 * spliced in front of the record's own JSON (the same text the copy would give; a record is written per
 * stage and event, so the copy was an allocation per row).
 */
function versionedJson(record: object): string {
  const text = JSON.stringify(record);
  return text === '{}' ? `${versionPrefix}}` : `${versionPrefix},${text.slice(1)}`;
}

/** The JSON of a stage record as stored. */
export function encodeStage(stage: StageRecord): string {
  return versionedJson(stage);
}

/** The JSON of a task row's record: everything but its history. */
export function encodeTask(task: WorkflowTask): string {
  const { history: _history, stageResults: _results, ...rest } = task;
  return JSON.stringify({ schemaVersion: workflowRecordVersion, ...rest });
}

export function encodeEvent(event: TelemetryEvent): string {
  return versionedJson(event);
}

export function decodeStage(text: string): StageRecord {
  const stage = decodeJson(text, storedStage, { what: 'a workflow stage record' });
  return { ...stage, contextMetadata: stage.contextMetadata };
}

/** A task as stored, with an empty history for the caller to fill from the stage rows. */
export function decodeTask(text: string): WorkflowTask {
  const task = decodeJson(text, storedTask, { what: 'a workflow task record' });
  return {
    ...task,
    currentStageId: task.currentStageId,
    currentOutput: task.currentOutput,
    parentTaskId: task.parentTaskId,
    lineageType: task.lineageType,
    lineageMetadata: task.lineageMetadata,
    fanOut: task.fanOut,
    arrivedAtMerge: task.arrivedAtMerge,
    error: task.error,
    completedAt: task.completedAt,
    history: [],
    stageResults: {},
  };
}

export function decodeEvent(text: string): TelemetryEvent {
  const event = decodeJson(text, storedEvent, { what: 'a workflow event' });
  return { ...event, stageId: event.stageId };
}

/** Artifact payloads are any JSON the nodes produced; metadata is an object. */
export function decodeArtifactColumns(
  payload: string,
  metadata: string,
): Pick<Artifact, 'payload' | 'metadata'> {
  return {
    payload: decodeJson(payload, z.unknown(), { what: 'a workflow artifact payload' }),
    metadata: decodeJson(metadata, jsonObject, { what: 'workflow artifact metadata' }),
  };
}
