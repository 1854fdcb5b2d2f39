import { z } from 'zod';
import { decodeJson, ErrorCodes, numberJson, SystemError, utf8BytesOver } from '../util/index.js';
import { type Artifact, telemetrySnapshotId } from './artifacts.js';
import { nodeKinds, nodeRoles } from './manifest-schemas.js';
import {
  defaultSpecMode,
  defaultSpecPriority,
  lineageTypes,
  type StageRecord,
  specWithDefaults,
  taskLifecycles,
  taskStates,
  type WorkflowTask,
} from './task.js';
import { schedulerEventTypes, type TelemetryEvent, telemetryEventTypes } from './telemetry.js';
import { versioned } from './versioned.js';

/**
 * Persisted workflow JSON — task records, stage records, events and a run's end records — carries
 * `schemaVersion`. Version 1 is the first to say so; records written before (version 0) have the same
 * fields and read as version 1. Version 2 changed only the stage record: it no longer repeats what its
 * row's columns hold (index, node, status, start and end), leaves out an input that is the previous stage's
 * output, an empty `toolCalls`, and may name the sequence numbers of the two events it stands for (see
 * `StageRowExtras`). Version 3 writes a run's end records (its events and artifacts besides those its stage
 * rows stand for) as one document on its root task's row (`encodeRunRecords`, migration 0046) instead of a
 * row each in `workflow_events` and `workflow_artifacts`, and the stage records written with the row that
 * concludes their task as a list on that row (`encodeStageList`) instead of a row each in
 * `workflow_stages`; the records themselves keep their shapes. Version 4 changed only the end records
 * document: its events leave out what every event of the run repeats (see `encodeRunRecords`), and its
 * artifacts their task when it is the run's root. Version 5 shortened what a run writes on its task rows
 * (decision 0053): a task record leaves out what the row's columns hold and the spec's and lists' defaults,
 * and writes its routing steps as arrays (`encodeTask`); a stage list is an object stating the version once,
 * whose entries leave out what follows from the entry before them (`encodeStageList`); an end records document
 * writes times as offsets from one it states (`encodeRunRecords`). Events (in their own rows) have the same
 * shape in every version. A change of shape adds the next version here
 * with an upgrade, and `scripts/workflow-record-fixtures.ts` then writes that version's file of the corpus
 * that test/workflow/records.test.ts reads.
 */
export const workflowRecordVersion = 5;

const outcome = z.enum(['success', 'failure', 'partial']);
const errorShape = z.object({ code: z.string(), message: z.string() });
const taskError = errorShape.extend({ nodeId: z.string().optional() });
const jsonObject = z.record(z.string(), z.unknown());

// `optional()` on every `unknown` a record may lack: JSON drops a field whose value is undefined (a run given
// no input, a subtask that never ran), and zod requires the key of a bare `unknown`.
const toolCallSchema = z.object({
  toolId: z.string(),
  input: z.unknown().optional(),
  output: z.unknown().optional(),
  status: outcome,
  error: errorShape.optional(),
  misuse: z.boolean(),
  startedAt: z.number(),
  completedAt: z.number(),
});

/**
 * A stage record as stored: version 2 leaves the fields of its row's columns out (optional here, for the
 * older records that hold them), `input` when `inputFromPrevious`, and `toolCalls` when empty.
 */
const storedStageSchema = z.object({
  index: z.number().int().min(0).optional(),
  nodeId: z.string().optional(),
  nodeRole: z.enum(nodeRoles),
  nodeKind: z.enum(nodeKinds),
  input: z.unknown().optional(),
  inputFromPrevious: z.literal(true).optional(),
  output: z.unknown().optional(),
  error: errorShape.optional(),
  nodeStatus: outcome.optional(),
  toolCalls: z.array(toolCallSchema).optional(),
  contextProfileId: z.string(),
  contextMetadata: jsonObject.optional(),
  startedAt: z.number().optional(),
  completedAt: z.number().optional(),
  eventSeqs: z.tuple([z.number().int(), z.number().int()]).optional(),
  /** Version 5: `eventSeqs` when they follow each other, `[seq, seq + 1]`. */
  seq: z.number().int().optional(),
});

const taskSpecSchema = z.object({
  taskSpecId: z.string(),
  request: z.string(),
  input: z.unknown().optional(),
  mode: z.enum(['analysis_only', 'implement', 'review', 'dry_run']),
  priority: z.enum(['low', 'normal', 'high']),
  hints: z.array(z.string()),
  files: z.array(z.string()),
  overrides: z.array(z.string()),
  metadata: jsonObject,
});

const lifecycleNames = z.enum(taskLifecycles);
const taskStateNames = z.enum(taskStates);
const lineageTypeNames = z.enum(lineageTypes);

/**
 * The task row's record: the task without its history, which lives in the stage rows. Up to version 4 it
 * holds every field; version 5 leaves out what the row's columns hold (`TaskColumns`), a spec's defaults, and
 * empty lists, and writes a routing step as `[from, to, role]`, with `label` (or null) and `childTaskId`
 * after them when it has them.
 */
const storedTaskSchema = z.object({
  taskId: z.string().optional(),
  rootTaskId: z.string().optional(),
  workflowId: z.string().optional(),
  spec: taskSpecSchema.partial({
    taskSpecId: true,
    request: true,
    mode: true,
    priority: true,
    hints: true,
    files: true,
    overrides: true,
    metadata: true,
  }),
  lifecycle: lifecycleNames.optional(),
  state: taskStateNames.optional(),
  currentStageId: z.string().optional(),
  currentOutput: z.unknown().optional(),
  routingTrace: z.array(
    z.union([
      z.object({
        from: z.string(),
        to: z.string(),
        role: z.enum(nodeRoles),
        label: z.string().optional(),
        childTaskId: z.string().optional(),
      }),
      z.tuple([
        z.string(),
        z.string(),
        z.enum(nodeRoles),
        z.string().nullable().optional(),
        z.string().optional(),
      ]),
    ]),
  ),
  failureSignatures: z.array(z.string()).optional(),
  parentTaskId: z.string().optional(),
  lineageType: lineageTypeNames.optional(),
  lineageMetadata: jsonObject.optional(),
  childTaskIds: z.array(z.string()).optional(),
  fanOut: z.object({ nodeId: z.string(), role: z.enum(['branch', 'split']) }).optional(),
  arrivedAtMerge: z.string().optional(),
  toleratedFailure: z.boolean().optional(),
  error: taskError.optional(),
  createdAt: z.number().optional(),
  updatedAt: z.number().optional(),
  completedAt: z.number().optional(),
});

/** A time column as a driver gives it back: a number, or (Postgres' BIGINT) its digits. */
const timeColumn = z.union([
  z.number(),
  z
    .string()
    .regex(/^-?\d+$/)
    .transform(Number),
]);

/** The columns of a task row that a version-5 record does not repeat, as read back. */
const taskColumnsSchema = z.object({
  task_id: z.string(),
  root_task_id: z.string(),
  workflow_id: z.string(),
  parent_task_id: z.string().nullable(),
  lineage_type: lineageTypeNames.nullable(),
  lifecycle: lifecycleNames,
  status: taskStateNames,
  created_at: timeColumn,
  updated_at: timeColumn,
  completed_at: timeColumn.nullable(),
});
export type TaskColumns = z.input<typeof taskColumnsSchema>;
/** The task row's columns of `TaskColumns`, as a SELECT names them. */
export const taskColumnsSql = Object.keys(taskColumnsSchema.shape).join(', ');

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

// Version 0 → 1 only added the version field itself and 1 → 2 left task records and events as they were;
// a version-1 stage record is a version-2 one that holds every field itself.
const storedStage = versioned(workflowRecordVersion, storedStageSchema);
const storedTask = versioned(workflowRecordVersion, storedTaskSchema);
const storedEvent = versioned(workflowRecordVersion, eventSchema);

const versionPrefix = `{"schemaVersion":${workflowRecordVersion}`;
/** The JSON of the roles', kinds' and event types' names, written with every stage, routing step and event. */
const enumTexts: ReadonlyMap<string, string> = new Map(
  [...nodeRoles, ...nodeKinds, ...telemetryEventTypes, ...schedulerEventTypes].map((name) => [
    name,
    JSON.stringify(name),
  ]),
);
/** Such a name as JSON: looked up, not encoded again (any other string is encoded). */
const enumJson = (name: string): string => enumTexts.get(name) ?? JSON.stringify(name);

/**
 * The JSON of objects that cannot change — frozen all the way down, plain, with no getters — by identity:
 * the metadata every run of a workflow shares (its telemetry snapshot's, its nodes' outputs'), written with
 * every run's end records. Any other value is encoded each time.
 */
const frozenJsonTexts = new WeakMap<object, string>();
function frozenObjectJson(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  const cached = frozenJsonTexts.get(value);
  if (cached !== undefined) return cached;
  const text = JSON.stringify(value);
  if (text !== undefined && cannotChange(value)) frozenJsonTexts.set(value, text);
  return text;
}

function cannotChange(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return typeof value !== 'function';
  if (!Object.isFrozen(value)) return false;
  const prototype = Object.getPrototypeOf(value);
  if (!Array.isArray(value) && prototype !== Object.prototype && prototype !== null) return false;
  for (const descriptor of Object.values(Object.getOwnPropertyDescriptors(value))) {
    if (!('value' in descriptor) || !cannotChange(descriptor.value)) return false;
  }
  return !('toJSON' in value);
}

/** The columns of a stage row that a version-2 record does not repeat. */
export interface StageColumns {
  stage_index: number;
  node_id: string;
  node_status: string;
  started_at: number;
  completed_at: number;
}

/**
 * What a stage row may say besides its record: the sequence numbers of the stage's `node_started` and
 * end event when the row stands for them and for the stage's `node_output` artifact (a run without
 * redaction), which are then made from the record when the run is read.
 */
export interface StageRowExtras {
  eventSeqs?: readonly [number, number];
}

/**
 * The JSON of a stage record as a stage row stores it (version 2 on). `previous` is the stage before it in the
 * same task: when the stage's input is that stage's output (the same value, as a chain hands it on), it is not
 * written twice.
 */
export function encodeStage(stage: StageRecord, previous?: StageRecord, extras: StageRowExtras = {}): string {
  return stageRowRecord(encodeStageFields(stage, previous, extras));
}

/** A stage row's record, made of a stage's fields (`encodeStageFields`). */
export const stageRowRecord = (fields: string): string => `${versionPrefix},${fields}}`;

/**
 * A stage record's fields as JSON without braces: what a stage row's record and an entry of a task row's
 * list of stages (`encodeStageList`) are both made of, so that neither cuts the other's text. Sequence
 * numbers that follow each other are written as the first (`seq`).
 */
export function encodeStageFields(
  stage: StageRecord,
  previous?: StageRecord,
  extras: StageRowExtras = {},
): string {
  let text = `"nodeRole":${enumJson(stage.nodeRole)},"nodeKind":${enumJson(stage.nodeKind)}`;
  // A value with no JSON (undefined) is left out, as JSON.stringify of the whole record would.
  if (previous !== undefined && stage.input === previous.output && previous.output !== undefined)
    text += ',"inputFromPrevious":true';
  else {
    const input = JSON.stringify(stage.input);
    if (input !== undefined) text += `,"input":${input}`;
  }
  const output = JSON.stringify(stage.output);
  if (output !== undefined) text += `,"output":${output}`;
  if (stage.error) text += `,"error":${JSON.stringify(stage.error)}`;
  if (stage.toolCalls.length > 0) text += `,"toolCalls":${JSON.stringify(stage.toolCalls)}`;
  text += `,"contextProfileId":${JSON.stringify(stage.contextProfileId)}`;
  if (stage.contextMetadata !== undefined)
    text += `,"contextMetadata":${JSON.stringify(stage.contextMetadata)}`;
  if (extras.eventSeqs) {
    const [start, end] = extras.eventSeqs;
    text += end === start + 1 ? `,"seq":${start}` : `,"eventSeqs":[${start},${end}]`;
  }
  return text;
}

/** Whole numbers a time may be written as an offset of without losing a digit. */
const offsetable = (base: number, time: number): boolean =>
  Number.isSafeInteger(base) && Number.isSafeInteger(time) && Number.isSafeInteger(time - base);

/**
 * A task row's list of stages (version 5), in index order: `{"schemaVersion":5,"timesFrom":T,"stages":[…]}`,
 * T being the first stage's start. An entry is a stage's fields (`encodeStageFields`) with what a stage row
 * holds in its columns: its node; its index only when it is not the one after the entry before's (0 for the
 * first); its status only when it is not `success`; and its start and end as `"times":[start - T, end -
 * start]`, or as `startedAt` and `completedAt` when these are not whole numbers. Up to version 4 each entry
 * held all of it, and its own version.
 */
export function encodeStageList(entries: ReadonlyArray<{ fields: string; columns: StageColumns }>): string {
  const timesFrom = entries[0]?.columns.started_at ?? 0;
  let text = `${versionPrefix},"timesFrom":${numberJson(timesFrom)},"stages":[`;
  let expectedIndex = 0;
  for (let at = 0; at < entries.length; at++) {
    const { fields, columns } = entries[at]!;
    if (at > 0) text += ',';
    text += `{"nodeId":${quote(columns.node_id)}`;
    if (columns.stage_index !== expectedIndex) text += `,"index":${columns.stage_index}`;
    expectedIndex = columns.stage_index + 1;
    if (columns.node_status !== 'success') text += `,"nodeStatus":${quote(columns.node_status)}`;
    const { started_at: startedAt, completed_at: completedAt } = columns;
    text +=
      offsetable(timesFrom, startedAt) && offsetable(startedAt, completedAt)
        ? `,"times":[${startedAt - timesFrom},${completedAt - startedAt}]`
        : `,"startedAt":${numberJson(startedAt)},"completedAt":${numberJson(completedAt)}`;
    text += `,${fields}}`;
  }
  return `${text}]}`;
}

/**
 * The fields of a task that its row's columns hold, which a version-5 record leaves out (see `TaskColumns`).
 */
export const taskColumnFields = [
  'taskId',
  'rootTaskId',
  'workflowId',
  'parentTaskId',
  'lineageType',
  'lifecycle',
  'state',
  'createdAt',
  'updatedAt',
  'completedAt',
] as const satisfies ReadonlyArray<keyof WorkflowTask>;

/**
 * The fields of a task record, each written by `encodeTask` (when it is not its default): a field added to
 * `WorkflowTask` fails to compile until it is listed here or in `taskColumnFields`, and
 * test/workflow/records.test.ts checks that each listed field is written.
 */
export const taskRecordFields = [
  'spec',
  'currentStageId',
  'currentOutput',
  'routingTrace',
  'failureSignatures',
  'lineageMetadata',
  'childTaskIds',
  'fanOut',
  'arrivedAtMerge',
  'toleratedFailure',
  'error',
] as const satisfies ReadonlyArray<keyof WorkflowTask>;
type UnlistedTaskField = Exclude<
  keyof WorkflowTask,
  'history' | (typeof taskRecordFields)[number] | (typeof taskColumnFields)[number]
>;
const everyTaskFieldListed: [UnlistedTaskField] extends [never] ? true : UnlistedTaskField = true;
void everyTaskFieldListed;

const quote = JSON.stringify as (value: string) => string;
/** `,"key":<JSON>`, or nothing when the value has no JSON (undefined), as JSON.stringify leaves such a key out. */
function field(key: string, value: unknown): string {
  const json = JSON.stringify(value);
  return json === undefined ? '' : `,"${key}":${json}`;
}
/** `,"key":[…]`, or nothing for an empty list (which reads back empty). */
const listField = (key: string, list: ReadonlyArray<string>): string =>
  list.length === 0 ? '' : `,"${key}":${JSON.stringify(list)}`;

/**
 * The task row's record (version 5): the task without its history, which lives in the stage rows, and
 * without what the row's columns hold (`taskColumnFields`). A spec's `taskSpecId` is left out when it is the
 * task's id, its `request` when it is its input (a string), its mode and priority when `implement` and
 * `normal`, its lists and metadata when empty; so are the task's empty lists and a `toleratedFailure` that is
 * false. Written field by field: on Node 20, JSON.stringify looks up `toJSON` on every object it meets, about
 * 0.1 µs each, and a task record is some twenty of them.
 */
export function encodeTask(task: WorkflowTask): string {
  const spec = task.spec;
  let specText = '';
  if (spec.taskSpecId !== task.taskId) specText += `,"taskSpecId":${quote(spec.taskSpecId)}`;
  if (spec.request !== spec.input) specText += `,"request":${quote(spec.request)}`;
  specText += field('input', spec.input);
  if (spec.mode !== defaultSpecMode) specText += `,"mode":${quote(spec.mode)}`;
  if (spec.priority !== defaultSpecPriority) specText += `,"priority":${quote(spec.priority)}`;
  specText += listField('hints', spec.hints);
  specText += listField('files', spec.files);
  specText += listField('overrides', spec.overrides);
  const metadata = JSON.stringify(spec.metadata);
  if (metadata !== '{}') specText += `,"metadata":${metadata}`;
  let text = `${versionPrefix},"spec":{${specText.slice(1)}}`;
  if (task.currentStageId !== undefined) text += `,"currentStageId":${quote(task.currentStageId)}`;
  text += field('currentOutput', task.currentOutput);
  text += ',"routingTrace":[';
  const trace = task.routingTrace;
  for (let index = 0; index < trace.length; index++) {
    const step = trace[index]!;
    if (index > 0) text += ',';
    text += `[${quote(step.from)},${quote(step.to)},${enumJson(step.role)}`;
    if (step.childTaskId !== undefined)
      text += `,${step.label === undefined ? 'null' : quote(step.label)},${quote(step.childTaskId)}`;
    else if (step.label !== undefined) text += `,${quote(step.label)}`;
    text += ']';
  }
  text += ']';
  text += listField('failureSignatures', task.failureSignatures);
  text += field('lineageMetadata', task.lineageMetadata);
  text += listField('childTaskIds', task.childTaskIds);
  if (task.fanOut !== undefined)
    text += `,"fanOut":{"nodeId":${quote(task.fanOut.nodeId)},"role":${quote(task.fanOut.role)}}`;
  if (task.arrivedAtMerge !== undefined) text += `,"arrivedAtMerge":${quote(task.arrivedAtMerge)}`;
  if (task.toleratedFailure) text += ',"toleratedFailure":true';
  text += field('error', task.error);
  return `${text}}`;
}

/**
 * A stage row read back: its record, with the fields a version-2 record leaves to the row's columns and
 * the input it shares with `previous` (the stage before it in the same task, already decoded), and what
 * else the row says.
 */
export function decodeStageRow(
  text: string,
  columns: StageColumns,
  previous?: StageRecord,
): { stage: StageRecord; extras: StageRowExtras } {
  return stageOf(decodeJson(text, storedStage, { what: 'a workflow stage record' }), columns, previous);
}

const storedStageArray = z.array(storedStage);
const storedStageListDocument = versioned(
  workflowRecordVersion,
  z.object({
    timesFrom: z.number(),
    stages: z.array(
      storedStageSchema.extend({
        nodeId: z.string(),
        times: z.tuple([z.number(), z.number()]).optional(),
      }),
    ),
  }),
);

/**
 * The stage records of a task row's list (`encodeStageList`; up to version 4, a JSON array of entries that
 * each hold their index, node, status and times), as stored, in index order: decode each with
 * `decodeStoredStage`, after the stage before it.
 */
export function decodeStageList(text: string, taskId: string): StoredStage[] {
  const what = `the stage list of workflow task ${taskId}`;
  const options = { what, maxBytes: workflowDocumentMaxBytes };
  let stages: StoredStage[];
  // Looked at without copying: a list may be hundreds of megabytes.
  if (/^\s*\[/.test(text)) stages = decodeJson(text, storedStageArray, options);
  else {
    const list = decodeJson(text, storedStageListDocument, options);
    let nextIndex = 0;
    stages = list.stages.map(({ times, ...entry }) => {
      const index = entry.index ?? nextIndex;
      nextIndex = index + 1;
      const startedAt = entry.startedAt ?? (times ? list.timesFrom + times[0] : undefined);
      const completedAt =
        entry.completedAt ?? (times && startedAt !== undefined ? startedAt + times[1] : undefined);
      return { ...entry, index, nodeStatus: entry.nodeStatus ?? 'success', startedAt, completedAt };
    });
  }
  let last = -1;
  for (const stage of stages) {
    // What a stage row holds in its columns, each entry must hold itself, in stage order.
    const complete =
      stage.index !== undefined &&
      stage.nodeId !== undefined &&
      stage.nodeStatus !== undefined &&
      stage.startedAt !== undefined &&
      stage.completedAt !== undefined;
    if (!complete || stage.index! <= last)
      throw new SystemError({
        code: ErrorCodes.jsonUndecodable,
        message: `${what} cannot be read: ${complete ? 'its stages are not in order' : `stage ${stage.index ?? last + 1} lacks its index, node, status or times`}`,
      });
    last = stage.index!;
  }
  return stages;
}

export type StoredStage = z.infer<typeof storedStageSchema>;

/** A stage of a task row's list (see `decodeStageList`), decoded after `previous`. */
export function decodeStoredStage(
  stored: StoredStage,
  previous?: StageRecord,
): { stage: StageRecord; extras: StageRowExtras } {
  return stageOf(stored, undefined, previous);
}

function stageOf(
  stored: StoredStage,
  columns: StageColumns | undefined,
  previous: StageRecord | undefined,
): { stage: StageRecord; extras: StageRowExtras } {
  const index = stored.index ?? Number(columns?.stage_index);
  const nodeId = stored.nodeId ?? columns?.node_id;
  if (stored.inputFromPrevious && !previous) {
    throw new SystemError({
      code: ErrorCodes.jsonUndecodable,
      message: `workflow stage record ${index} of node ${nodeId} takes its input from a stage that was not read`,
    });
  }
  const stage: StageRecord = {
    index,
    nodeId: nodeId!,
    nodeRole: stored.nodeRole,
    nodeKind: stored.nodeKind,
    input: stored.inputFromPrevious ? previous!.output : stored.input,
    output: stored.output,
    nodeStatus: stored.nodeStatus ?? (columns?.node_status as StageRecord['nodeStatus']),
    toolCalls: stored.toolCalls?.map((call) => ({ ...call, input: call.input })) ?? [],
    contextProfileId: stored.contextProfileId,
    contextMetadata: stored.contextMetadata,
    startedAt: stored.startedAt ?? Number(columns?.started_at),
    completedAt: stored.completedAt ?? Number(columns?.completed_at),
  };
  if (stored.error) stage.error = stored.error;
  const eventSeqs =
    stored.eventSeqs ?? (stored.seq === undefined ? undefined : ([stored.seq, stored.seq + 1] as const));
  return { stage, extras: eventSeqs ? { eventSeqs } : {} };
}

/**
 * A task as stored, with an empty history for the caller to fill from the stage rows: its record, and its
 * row's columns for what a version-5 record leaves to them.
 */
export function decodeTask(text: string, row: TaskColumns): WorkflowTask {
  const what = 'a workflow task record';
  const task = decodeJson(text, storedTask, { what });
  const parsedColumns = taskColumnsSchema.safeParse(row);
  if (!parsedColumns.success)
    throw new SystemError({
      code: ErrorCodes.jsonUndecodable,
      message: `${what} cannot be read: its row's columns are not a task's (${parsedColumns.error.issues[0]?.path.join('.')})`,
    });
  const columns = parsedColumns.data;
  const spec = task.spec;
  const request = spec.request ?? (typeof spec.input === 'string' ? spec.input : undefined);
  if (request === undefined)
    throw new SystemError({
      code: ErrorCodes.jsonUndecodable,
      message: `${what} cannot be read: its spec has neither a request nor an input that is one`,
    });
  const taskId = task.taskId ?? columns.task_id;
  return {
    taskId,
    rootTaskId: task.rootTaskId ?? columns.root_task_id,
    workflowId: task.workflowId ?? columns.workflow_id,
    spec: specWithDefaults(spec.taskSpecId ?? taskId, request, spec.input, spec),
    lifecycle: task.lifecycle ?? columns.lifecycle,
    state: task.state ?? columns.status,
    currentStageId: task.currentStageId,
    currentOutput: task.currentOutput,
    routingTrace: task.routingTrace.map((step) => {
      if (!Array.isArray(step)) return step;
      const [from, to, role, label, childTaskId] = step;
      const routed: WorkflowTask['routingTrace'][number] = { from, to, role };
      if (label !== undefined && label !== null) routed.label = label;
      if (childTaskId !== undefined) routed.childTaskId = childTaskId;
      return routed;
    }),
    failureSignatures: task.failureSignatures ?? [],
    parentTaskId: task.parentTaskId ?? columns.parent_task_id ?? undefined,
    lineageType: task.lineageType ?? columns.lineage_type ?? undefined,
    lineageMetadata: task.lineageMetadata,
    childTaskIds: task.childTaskIds ?? [],
    fanOut: task.fanOut,
    arrivedAtMerge: task.arrivedAtMerge,
    toleratedFailure: task.toleratedFailure ?? false,
    error: task.error,
    createdAt: task.createdAt ?? columns.created_at,
    updatedAt: task.updatedAt ?? columns.updated_at,
    completedAt: task.completedAt ?? columns.completed_at ?? undefined,
    history: [],
  };
}

export function decodeEvent(text: string): TelemetryEvent {
  const event = decodeJson(text, storedEvent, { what: 'a workflow event' });
  return { ...event, stageId: event.stageId };
}

const storedArtifactSchema = z.object({
  artifactId: z.string(),
  taskId: z.string(),
  nodeId: z.string().optional(),
  type: z.enum(['node_output', 'tool_result', 'telemetry_snapshot']),
  createdAt: z.number(),
  payload: z.unknown().optional(),
  metadata: jsonObject,
});

/**
 * An event of a run's end records: version 4 leaves out its id when it is `<root task>:<seq>` (writing `seq`
 * instead), its root and task when they are the run's root, and its metadata when it names the document's
 * workflow; a version-3 document's events hold all of it (and their own `schemaVersion`, which the
 * document's states for them).
 */
const storedRunEventSchema = z.object({
  eventId: z.string().optional(),
  seq: z.number().int().min(0).optional(),
  rootTaskId: z.string().optional(),
  taskId: z.string().optional(),
  stageId: z.string().optional(),
  type: eventSchema.shape.type,
  timestamp: z.number().optional(),
  /** Version 5: the timestamp as an offset from the document's `timesFrom`. */
  at: z.number().optional(),
  payload: jsonObject,
  metadata: eventSchema.shape.metadata.optional(),
});

const storedRunRecords = versioned(
  workflowRecordVersion,
  z.object({
    workflowId: z.string().optional(),
    timesFrom: z.number().optional(),
    events: z.array(storedRunEventSchema),
    artifacts: z.array(
      storedArtifactSchema.extend({
        artifactId: z.string().optional(),
        taskId: z.string().optional(),
        createdAt: z.number().optional(),
        at: z.number().optional(),
      }),
    ),
  }),
);

/**
 * A run's end records hold every event and artifact it had besides those its stage rows stand for, and a task
 * row's stage list all the stages of its last batch: node outputs and tool results may add up to more than one
 * record's 16 MiB, so these documents may hold up to 256 MiB (V8's longest string is 512 MiB).
 */
export const workflowDocumentMaxBytes = 256 * 1024 * 1024;

/**
 * `text`, refused when it is longer than a document may be read back (`PAYLOAD_TOO_LARGE`): written, it would
 * make its run unreadable. The write fails instead, and the run's result names it (`recordsNotWritten`).
 */
export function withinDocumentLimit(text: string, what: string, maxBytes = workflowDocumentMaxBytes): string {
  const sizeBytes = utf8BytesOver(text, maxBytes);
  if (sizeBytes !== undefined)
    throw new SystemError({
      code: ErrorCodes.payloadTooLarge,
      message: `${what} would be ${sizeBytes} bytes; a stored document may hold ${maxBytes}`,
      details: { sizeBytes, maxBytes },
    });
  return text;
}

/**
 * The JSON of a run's end records (version 5): its events and artifacts without what the row and the
 * document already say. An event of the run is `{seq, type, at, payload}` (and its `stageId`): its id is
 * `<root task>:<seq>`, its root and task are the row's, its metadata names the document's `workflowId`, and its
 * timestamp is `at` after the document's `timesFrom` (the first event's); an event that differs in any of these
 * writes that field (a time that is not a whole number as `timestamp`). An artifact leaves out the run's id, its
 * task when that is the root, its id when it is the telemetry snapshot's (`telemetrySnapshotId`), and writes its time
 * as `at` too. Refused above `maxBytes` (see `withinDocumentLimit`). In version 3, which wrote each event whole,
 * the events were most of this document and two thirds of its encoding time.
 */
export function encodeRunRecords(
  rootTaskId: string,
  events: ReadonlyArray<TelemetryEvent>,
  artifacts: ReadonlyArray<Artifact>,
  maxBytes = workflowDocumentMaxBytes,
): string {
  const workflowId = events[0]?.metadata.workflowId;
  const timesFrom = events[0]?.timestamp ?? artifacts[0]?.createdAt ?? 0;
  const timeField = (key: string, time: number) =>
    offsetable(timesFrom, time) ? `,"at":${time - timesFrom}` : `,"${key}":${numberJson(time)}`;
  let text = versionPrefix;
  if (workflowId !== undefined) text += `,"workflowId":${JSON.stringify(workflowId)}`;
  text += `,"timesFrom":${numberJson(timesFrom)},"events":[`;
  for (let index = 0; index < events.length; index++) {
    const event = events[index]!;
    if (index > 0) text += ',';
    const seq = seqOf(event.eventId, rootTaskId);
    text += seq === undefined ? `{"eventId":${JSON.stringify(event.eventId)}` : `{"seq":${seq}`;
    if (event.rootTaskId !== rootTaskId) text += `,"rootTaskId":${JSON.stringify(event.rootTaskId)}`;
    if (event.taskId !== rootTaskId) text += `,"taskId":${JSON.stringify(event.taskId)}`;
    if (event.stageId !== undefined) text += `,"stageId":${JSON.stringify(event.stageId)}`;
    text += `,"type":${enumJson(event.type)}${timeField('timestamp', event.timestamp)},"payload":${JSON.stringify(event.payload)}`;
    if (event.metadata.workflowId !== workflowId) text += `,"metadata":${JSON.stringify(event.metadata)}`;
    text += '}';
  }
  text += '],"artifacts":[';
  for (let index = 0; index < artifacts.length; index++) {
    const artifact = artifacts[index]!;
    if (index > 0) text += ',';
    text += `{"type":${quote(artifact.type)}`;
    if (
      artifact.type !== 'telemetry_snapshot' ||
      artifact.artifactId !== telemetrySnapshotId(artifact.taskId)
    )
      text += `,"artifactId":${quote(artifact.artifactId)}`;
    if (artifact.taskId !== rootTaskId) text += `,"taskId":${quote(artifact.taskId)}`;
    if (artifact.nodeId !== undefined) text += `,"nodeId":${quote(artifact.nodeId)}`;
    // A payload without JSON (undefined) reads back null, as an artifact row's did.
    text += `${timeField('createdAt', artifact.createdAt)}${field('payload', artifact.payload ?? null)}`;
    const metadata = frozenObjectJson(artifact.metadata);
    text += metadata === undefined ? '}' : `,"metadata":${metadata}}`;
  }
  return withinDocumentLimit(`${text}]}`, `the end records of workflow run ${rootTaskId}`, maxBytes);
}

/** `seq` when `eventId` is `<rootTaskId>:<seq>` exactly as the emitter writes it (so it reads back equal). */
function seqOf(eventId: string, rootTaskId: string): number | undefined {
  const from = rootTaskId.length + 1;
  // Digits after the colon, without a leading zero, as a safe integer: what `${seq}` writes.
  const digits = eventId.length - from;
  if (digits < 1 || digits > 15 || eventId.charCodeAt(from - 1) !== 58) return undefined;
  if (digits > 1 && eventId.charCodeAt(from) === 48) return undefined;
  let seq = 0;
  for (let at = from; at < eventId.length; at++) {
    const digit = eventId.charCodeAt(at) - 48;
    if (digit < 0 || digit > 9) return undefined;
    seq = seq * 10 + digit;
  }
  return eventId.startsWith(rootTaskId) ? seq : undefined;
}

/** A run's end records read back from its root task's row `rootTaskId`. */
export function decodeRunRecords(
  text: string,
  rootTaskId: string,
): { events: TelemetryEvent[]; artifacts: Artifact[] } {
  const what = `the end records of workflow run ${rootTaskId}`;
  const stored = decodeJson(text, storedRunRecords, { what, maxBytes: workflowDocumentMaxBytes });
  const documentMetadata =
    stored.workflowId === undefined ? undefined : Object.freeze({ workflowId: stored.workflowId });
  const fault = (message: string) =>
    new SystemError({ code: ErrorCodes.jsonUndecodable, message: `${what} cannot be read: ${message}` });
  /** A time written as itself, or (version 5) as an offset from the document's. */
  const timeOf = (time: number | undefined, at: number | undefined, whose: string): number => {
    if (time !== undefined) return time;
    if (at === undefined || stored.timesFrom === undefined) throw fault(`${whose} has no time`);
    return stored.timesFrom + at;
  };
  return {
    events: stored.events.map((event, index): TelemetryEvent => {
      const eventId = event.eventId ?? (event.seq === undefined ? undefined : `${rootTaskId}:${event.seq}`);
      const metadata = event.metadata ?? documentMetadata;
      if (eventId === undefined || metadata === undefined)
        throw fault(`event ${index} has no ${eventId === undefined ? 'id or sequence number' : 'workflow'}`);
      return {
        eventId,
        rootTaskId: event.rootTaskId ?? rootTaskId,
        taskId: event.taskId ?? rootTaskId,
        stageId: event.stageId,
        type: event.type,
        timestamp: timeOf(event.timestamp, event.at, `event ${index}`),
        payload: event.payload,
        // One object per document: events of a run share theirs in memory too (see the emitter).
        metadata,
      };
    }),
    artifacts: stored.artifacts.map((artifact, index): Artifact => {
      const taskId = artifact.taskId ?? rootTaskId;
      const artifactId =
        artifact.artifactId ??
        (artifact.type === 'telemetry_snapshot' ? telemetrySnapshotId(taskId) : undefined);
      if (artifactId === undefined) throw fault(`artifact ${index} has no id`);
      return {
        artifactId,
        rootTaskId,
        taskId,
        nodeId: artifact.nodeId,
        type: artifact.type,
        createdAt: timeOf(artifact.createdAt, artifact.at, `artifact ${index}`),
        payload: artifact.payload,
        metadata: artifact.metadata,
      };
    }),
  };
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
