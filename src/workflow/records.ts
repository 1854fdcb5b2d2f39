import { z } from 'zod';
import { decodeJson, ErrorCodes, numberJson, SystemError, utf8BytesOver } from '../util/index.js';
import type { Artifact } from './artifacts.js';
import { nodeKinds, nodeRoles } from './manifest-schemas.js';
import type { StageRecord, WorkflowTask } from './task.js';
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
 * concludes their task as a list on that row (`stageListEntry`) instead of a row each in
 * `workflow_stages`; the records themselves keep their shapes. Version 4 changed only the end records
 * document: its events leave out what every event of the run repeats (see `encodeRunRecords`), and its
 * artifacts their task when it is the run's root. Task records and events (in their own rows) have the
 * same shape in every version. A change of shape adds the next version here
 * with an upgrade, and `scripts/workflow-record-fixtures.ts` then writes that version's file of the corpus
 * that test/workflow/records.test.ts reads.
 */
export const workflowRecordVersion = 4;

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

/** The task row's record: the task without its history, which lives in the stage rows. */
const taskSchema = z.object({
  taskId: z.string(),
  rootTaskId: z.string(),
  workflowId: z.string(),
  spec: taskSpecSchema,
  lifecycle: z.enum(['queued', 'active', 'suspended', 'concluded', 'archived']),
  state: z.enum(['pending', 'in_progress', 'completed', 'failed', 'partial', 'cancelled', 'blocked']),
  currentStageId: z.string().optional(),
  currentOutput: z.unknown().optional(),
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

// Version 0 → 1 only added the version field itself and 1 → 2 left task records and events as they were;
// a version-1 stage record is a version-2 one that holds every field itself.
const storedStage = versioned(workflowRecordVersion, storedStageSchema);
const storedTask = versioned(workflowRecordVersion, taskSchema);
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
 * The JSON of a stage record as stored (version 2). `previous` is the stage before it in the same task:
 * when the stage's input is that stage's output (the same value, as a chain hands it on), it is not
 * written twice.
 */
export function encodeStage(stage: StageRecord, previous?: StageRecord, extras: StageRowExtras = {}): string {
  return closeStageRecord(encodeStageOpen(stage, previous, extras));
}

/** A stage record as `encodeStageOpen` left it, closed: what a stage row holds. */
export const closeStageRecord = (openRecord: string): string => `${openRecord}}`;

/**
 * `encodeStage`'s JSON without its closing brace: what a stage row's record and a task row's list entry
 * (`stageListEntry`) are both made from, so that neither cuts the other's text.
 */
export function encodeStageOpen(
  stage: StageRecord,
  previous?: StageRecord,
  extras: StageRowExtras = {},
): string {
  let text = `${versionPrefix},"nodeRole":${enumJson(stage.nodeRole)},"nodeKind":${enumJson(stage.nodeKind)}`;
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
  if (extras.eventSeqs) text += `,"eventSeqs":[${extras.eventSeqs[0]},${extras.eventSeqs[1]}]`;
  return text;
}

/**
 * The fields of a task record, each written by `encodeTask`: a field added to `WorkflowTask` fails to compile
 * until it is listed here, and test/workflow/records.test.ts checks that each listed field is written.
 */
export const taskRecordFields = [
  'taskId',
  'rootTaskId',
  'workflowId',
  'spec',
  'lifecycle',
  'state',
  'currentStageId',
  'currentOutput',
  'routingTrace',
  'failureSignatures',
  'parentTaskId',
  'lineageType',
  'lineageMetadata',
  'childTaskIds',
  'fanOut',
  'arrivedAtMerge',
  'toleratedFailure',
  'error',
  'createdAt',
  'updatedAt',
  'completedAt',
] as const satisfies ReadonlyArray<keyof WorkflowTask>;
type UnlistedTaskField = Exclude<keyof WorkflowTask, 'history' | (typeof taskRecordFields)[number]>;
const everyTaskFieldListed: [UnlistedTaskField] extends [never] ? true : UnlistedTaskField = true;
void everyTaskFieldListed;

const quote = JSON.stringify as (value: string) => string;
const stringsJson = (list: ReadonlyArray<string>) => (list.length === 0 ? '[]' : JSON.stringify(list));
/** `,"key":<JSON>`, or nothing when the value has no JSON (undefined), as JSON.stringify leaves such a key out. */
function field(key: string, value: unknown): string {
  const json = JSON.stringify(value);
  return json === undefined ? '' : `,"${key}":${json}`;
}

/**
 * The task row's record: the task without its history, which lives in the stage rows. The JSON that
 * `JSON.stringify` of the record would write, written field by field: on Node 20, JSON.stringify looks up
 * `toJSON` on every object it meets, about 0.1 µs each, and a task record is some twenty of them (its trace's
 * steps, its spec, their lists), a tenth of a durable 3-node chain's work besides SQLite's.
 */
export function encodeTask(task: WorkflowTask): string {
  const spec = task.spec;
  let text = `${versionPrefix},"taskId":${quote(task.taskId)},"rootTaskId":${quote(task.rootTaskId)},"workflowId":${quote(task.workflowId)}`;
  text += `,"spec":{"taskSpecId":${quote(spec.taskSpecId)},"request":${quote(spec.request)}${field('input', spec.input)},"mode":${quote(spec.mode)},"priority":${quote(spec.priority)},"hints":${stringsJson(spec.hints)},"files":${stringsJson(spec.files)},"overrides":${stringsJson(spec.overrides)},"metadata":${JSON.stringify(spec.metadata)}}`;
  text += `,"lifecycle":${quote(task.lifecycle)},"state":${quote(task.state)}`;
  if (task.currentStageId !== undefined) text += `,"currentStageId":${quote(task.currentStageId)}`;
  text += field('currentOutput', task.currentOutput);
  text += ',"routingTrace":[';
  const trace = task.routingTrace;
  for (let index = 0; index < trace.length; index++) {
    const step = trace[index]!;
    if (index > 0) text += ',';
    text += `{"from":${quote(step.from)},"to":${quote(step.to)},"role":${enumJson(step.role)}`;
    if (step.label !== undefined) text += `,"label":${quote(step.label)}`;
    if (step.childTaskId !== undefined) text += `,"childTaskId":${quote(step.childTaskId)}`;
    text += '}';
  }
  text += `],"failureSignatures":${stringsJson(task.failureSignatures)}`;
  if (task.parentTaskId !== undefined) text += `,"parentTaskId":${quote(task.parentTaskId)}`;
  if (task.lineageType !== undefined) text += `,"lineageType":${quote(task.lineageType)}`;
  text += field('lineageMetadata', task.lineageMetadata);
  text += `,"childTaskIds":${stringsJson(task.childTaskIds)}`;
  if (task.fanOut !== undefined)
    text += `,"fanOut":{"nodeId":${quote(task.fanOut.nodeId)},"role":${quote(task.fanOut.role)}}`;
  if (task.arrivedAtMerge !== undefined) text += `,"arrivedAtMerge":${quote(task.arrivedAtMerge)}`;
  text += `,"toleratedFailure":${task.toleratedFailure}`;
  text += field('error', task.error);
  text += `,"createdAt":${numberJson(task.createdAt)},"updatedAt":${numberJson(task.updatedAt)}`;
  if (task.completedAt !== undefined) text += `,"completedAt":${numberJson(task.completedAt)}`;
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

/**
 * An entry of a task row's list of stages (version 3): the stage's record as `encodeStageOpen` wrote it, with
 * what a stage row holds in its columns added to it, so the list needs no columns of its own.
 */
export function stageListEntry(openRecord: string, columns: StageColumns): string {
  return `${openRecord},"index":${columns.stage_index},"nodeId":${JSON.stringify(columns.node_id)},"nodeStatus":${JSON.stringify(columns.node_status)},"startedAt":${columns.started_at},"completedAt":${columns.completed_at}}`;
}

const storedStageList = z.array(storedStage);

/**
 * The stage records of a task row's list (entries of `stageListEntry`, joined into a JSON array), as
 * stored, in index order: decode each with `decodeStoredStage`, after the stage before it.
 */
export function decodeStageList(text: string, taskId: string): StoredStage[] {
  const what = `the stage list of workflow task ${taskId}`;
  const stages = decodeJson(text, storedStageList, { what, maxBytes: workflowDocumentMaxBytes });
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
  return { stage, extras: stored.eventSeqs ? { eventSeqs: stored.eventSeqs } : {} };
}

/** A task as stored, with an empty history for the caller to fill from the stage rows. */
export function decodeTask(text: string): WorkflowTask {
  const task = decodeJson(text, storedTask, { what: 'a workflow task record' });
  return {
    ...task,
    spec: { ...task.spec, input: task.spec.input },
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
  timestamp: z.number(),
  payload: jsonObject,
  metadata: eventSchema.shape.metadata.optional(),
});

const storedRunRecords = versioned(
  workflowRecordVersion,
  z.object({
    workflowId: z.string().optional(),
    events: z.array(storedRunEventSchema),
    artifacts: z.array(storedArtifactSchema.extend({ taskId: z.string().optional() })),
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
 * The JSON of a run's end records (version 4): its events and artifacts without what the row and the
 * document already say. An event of the run is `{seq, type, timestamp, payload}` (and its `stageId`): its
 * id is `<root task>:<seq>`, its root and task are the row's, and its metadata names the document's
 * `workflowId`; an event that differs in any of these writes that field. An artifact leaves out the run's id,
 * and its task when that is the root. Refused above `maxBytes` (see `withinDocumentLimit`). In version 3, which
 * wrote each event whole, the events were most of this document and two thirds of its encoding time.
 */
export function encodeRunRecords(
  rootTaskId: string,
  events: ReadonlyArray<TelemetryEvent>,
  artifacts: ReadonlyArray<Artifact>,
  maxBytes = workflowDocumentMaxBytes,
): string {
  const workflowId = events[0]?.metadata.workflowId;
  let text = versionPrefix;
  if (workflowId !== undefined) text += `,"workflowId":${JSON.stringify(workflowId)}`;
  text += ',"events":[';
  for (let index = 0; index < events.length; index++) {
    const event = events[index]!;
    if (index > 0) text += ',';
    const seq = seqOf(event.eventId, rootTaskId);
    text += seq === undefined ? `{"eventId":${JSON.stringify(event.eventId)}` : `{"seq":${seq}`;
    if (event.rootTaskId !== rootTaskId) text += `,"rootTaskId":${JSON.stringify(event.rootTaskId)}`;
    if (event.taskId !== rootTaskId) text += `,"taskId":${JSON.stringify(event.taskId)}`;
    if (event.stageId !== undefined) text += `,"stageId":${JSON.stringify(event.stageId)}`;
    text += `,"type":${enumJson(event.type)},"timestamp":${numberJson(event.timestamp)},"payload":${JSON.stringify(event.payload)}`;
    if (event.metadata.workflowId !== workflowId) text += `,"metadata":${JSON.stringify(event.metadata)}`;
    text += '}';
  }
  text += '],"artifacts":[';
  for (let index = 0; index < artifacts.length; index++) {
    const artifact = artifacts[index]!;
    if (index > 0) text += ',';
    text += `{"artifactId":${quote(artifact.artifactId)}`;
    if (artifact.taskId !== rootTaskId) text += `,"taskId":${quote(artifact.taskId)}`;
    if (artifact.nodeId !== undefined) text += `,"nodeId":${quote(artifact.nodeId)}`;
    // A payload without JSON (undefined) reads back null, as an artifact row's did.
    text += `,"type":${quote(artifact.type)},"createdAt":${numberJson(artifact.createdAt)}${field('payload', artifact.payload ?? null)}`;
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
  return {
    events: stored.events.map((event, index): TelemetryEvent => {
      const eventId = event.eventId ?? (event.seq === undefined ? undefined : `${rootTaskId}:${event.seq}`);
      const metadata = event.metadata ?? documentMetadata;
      if (eventId === undefined || metadata === undefined)
        throw new SystemError({
          code: ErrorCodes.jsonUndecodable,
          message: `${what} cannot be read: event ${index} has no ${eventId === undefined ? 'id or sequence number' : 'workflow'}`,
        });
      return {
        eventId,
        rootTaskId: event.rootTaskId ?? rootTaskId,
        taskId: event.taskId ?? rootTaskId,
        stageId: event.stageId,
        type: event.type,
        timestamp: event.timestamp,
        payload: event.payload,
        // One object per document: events of a run share theirs in memory too (see the emitter).
        metadata,
      };
    }),
    artifacts: stored.artifacts.map(
      (artifact): Artifact => ({
        artifactId: artifact.artifactId,
        rootTaskId,
        taskId: artifact.taskId ?? rootTaskId,
        nodeId: artifact.nodeId,
        type: artifact.type,
        createdAt: artifact.createdAt,
        payload: artifact.payload,
        metadata: artifact.metadata,
      }),
    ),
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
