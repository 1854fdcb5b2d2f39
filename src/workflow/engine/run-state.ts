import { randomBytes } from 'node:crypto';
import type { WorkflowRecordWriter } from '../record-store.js';
import type { JobHandle } from '../scheduler.js';
import {
  type SpecOptions,
  type StageRecord,
  specWithDefaults,
  type TaskSpec,
  type TaskState,
  type WorkflowOutcome,
  type WorkflowTask,
} from '../task.js';
import type { TelemetryEvent } from '../telemetry.js';
import type { QuietEvent } from './emitter.js';
import type { WorkflowRunResult } from './types.js';

/** What a MERGE node receives per child (the manifest's snake_case shape, visible to merge functions). */
export interface MergeInput {
  task_id: string;
  node_id: string | undefined;
  status: WorkflowOutcome;
  output: unknown;
  error?: { code: string; message: string };
  stage_result_index: number;
  timestamp: number;
  lineage_metadata: Record<string, unknown>;
}

/** Everything one run of a workflow owns while it executes: its tasks, events, stage queue and result. */
export interface Run {
  root: WorkflowTask;
  tasks: Map<string, WorkflowTask>;
  /**
   * The events logged as they were emitted, in order: built, or — when nobody received them — noted as a
   * `QuietEvent` and built when read. Not the whole log: read it through `eventsOf`,
   * which merges in the `deferred` ones.
   */
  events: Array<TelemetryEvent | QuietEvent>;
  /**
   * Events of root-task stages that nobody received when they happened, made from their stage records when
   * someone asks (see `emitter.ts`): a stage's two events would otherwise be five objects kept for as long
   * as the run is. Noted as runs of consecutive sequence numbers, three numbers each: the first sequence
   * number, how many, and where the first one's record is in `deferredStages` (times two, plus one when it
   * is a stage's end). Within a run of numbers the events alternate start, end, start… of successive
   * records, since a task's stages follow each other: a chain's stages are one run of numbers, three
   * numbers in all. Undefined until the first one.
   */
  deferred: number[] | undefined;
  /** The records of the deferred stage events, each once, in the order the stages started. */
  deferredStages: StageRecord[] | undefined;
  seq: number;
  /**
   * Sequence numbers of the events that the run's stage rows stand for in the database (a stage row of a
   * run without redaction holds its two events and its `node_output` artifact), ascending; durable runs only.
   */
  coveredSeqs: number[];
  /** Created on first use (a node needing a signal, or a cancel): most deterministic runs never need one. */
  controller: AbortController | undefined;
  cancelled: boolean;
  /**
   * FIFO of stages to execute, each as two entries: the task, then the id of the node (see `queueStage`);
   * `head` avoids O(n) shifts. Not an object per stage: a chain queues one stage per node of every run.
   */
  queue: Array<WorkflowTask | string | undefined>;
  head: number;
  /** The node of the stage `nextStage` took off the queue last. */
  nextNodeId: string;
  /**
   * Parents whose children are all terminal and that will execute a MERGE with these inputs; made by the
   * first fan-out that joins (most runs have none).
   */
  pendingMerges: Map<string, MergeInput[]> | undefined;
  startNodeId: string;
  /**
   * False once the run's own span turned out to be a no-op (no tracer registered, no traced parent): its
   * stages then skip their spans too, which would be no-ops as well but cost a span object and a context
   * check each.
   */
  traced: boolean;
  finished: boolean;
  /** The executor's handle of the run, told of its end (see `JobHandle`); undefined when dispatched. */
  job: JobHandle | undefined;
  resolve: (result: WorkflowRunResult) => void;
  /** A failure to finish the run (a defect): its result rejects. */
  reject: (error: unknown) => void;
  result: Promise<WorkflowRunResult>;
  /** Writes of this run, chained so they land in order without blocking the next stage. */
  persistQueue: Promise<void>;
  /** Writes gathered for the next batch (see `persistence.ts`); undefined when none is waiting. */
  pendingWrites: Array<(writer: WorkflowRecordWriter) => Promise<void>> | undefined;
  /** Writes of this run that failed even one by one (a full disk), and the first one's error. */
  unwritten: { count: number; error: unknown } | undefined;
  /** The run holds its process's lease (`RunOwner.hold`): from its first write until its last landed. */
  holdsLease: boolean;
}

export type NewTaskFields = Partial<WorkflowTask> & Pick<WorkflowTask, 'taskId' | 'rootTaskId' | 'spec'>;

/** A task with every field at its starting value, overridden by `fields`. */
export function newTaskRecord(workflowId: string, now: number, fields: NewTaskFields): WorkflowTask {
  return { ...newRootTask(workflowId, now, fields.taskId, fields.spec), ...fields };
}

/**
 * Where every run's chain of writes starts: one settled promise shared by all, never a new one per run. A
 * run whose `persistQueue` is still this one has written nothing.
 */
export const noWrites: Promise<void> = Promise.resolve();

/**
 * A root task, every field at its starting value: one literal, no spread (every run makes one); other tasks
 * override it with their fields (`newTaskRecord`).
 */
export function newRootTask(workflowId: string, now: number, taskId: string, spec: TaskSpec): WorkflowTask {
  return {
    workflowId,
    lifecycle: 'queued',
    state: 'pending',
    currentStageId: undefined,
    currentOutput: undefined,
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
    taskId,
    rootTaskId: taskId,
    spec,
  };
}

/** A run that has not started: `root` is set by the caller through `newTaskRecord`. */
export function createRunState(root: WorkflowTask, startNodeId: string): Run {
  let resolve!: (result: WorkflowRunResult) => void;
  let reject!: (error: unknown) => void;
  const result = new Promise<WorkflowRunResult>((settle, fail) => {
    resolve = settle;
    reject = fail;
  });
  // Not `new Map([[id, root]])`: that builds two arrays and walks them with an iterator, on every run.
  const tasks = new Map<string, WorkflowTask>();
  tasks.set(root.taskId, root);
  return {
    root,
    tasks,
    events: [],
    deferred: undefined,
    deferredStages: undefined,
    seq: 0,
    coveredSeqs: [],
    controller: undefined,
    cancelled: false,
    queue: [],
    head: 0,
    nextNodeId: startNodeId,
    pendingMerges: undefined,
    startNodeId,
    traced: true,
    finished: false,
    job: undefined,
    resolve,
    reject,
    result,
    persistQueue: noWrites,
    pendingWrites: undefined,
    unwritten: undefined,
    holdsLease: false,
  };
}

/** The run's abort signal, created lazily; already aborted when the run was cancelled before anyone asked. */
export function signalOf(run: Run): AbortSignal {
  run.controller ??= new AbortController();
  if (run.cancelled && !run.controller.signal.aborted) run.controller.abort();
  return run.controller.signal;
}

export function abortRun(run: Run, reason: unknown): void {
  run.cancelled = true;
  run.controller?.abort(reason);
}

/** Queues a stage: `task` at the node `nodeId`. */
export function queueStage(run: Run, task: WorkflowTask, nodeId: string): void {
  run.queue.push(task, nodeId);
}

/**
 * Takes the next stage off the run's queue: gives its task (undefined when the queue is empty) and leaves
 * its node's id in `run.nextNodeId`.
 */
export function nextStage(run: Run): WorkflowTask | undefined {
  const { queue } = run;
  if (run.head >= queue.length) return undefined;
  // The only stage queued (every step of a chain): taken off the end, so the array never grows.
  if (run.head === 0 && queue.length === 2) {
    run.nextNodeId = queue.pop() as string;
    return queue.pop() as WorkflowTask;
  }
  const task = queue[run.head] as WorkflowTask;
  run.nextNodeId = queue[run.head + 1] as string;
  queue[run.head++] = undefined;
  queue[run.head++] = undefined;
  if (run.head === queue.length) {
    queue.length = 0;
    run.head = 0;
  }
  return task;
}

/** The state a task ends in when it reaches an EXIT (or a merge as a child): decided before, reported here. */
export function settledState(task: WorkflowTask): TaskState {
  if (task.state === 'failed' || task.state === 'partial') return task.state;
  return task.toleratedFailure ? 'partial' : 'completed';
}

/** What the next node of a task receives: the last output, else the run's input. */
export function nodeInput(task: WorkflowTask): unknown {
  return task.currentOutput !== undefined ? task.currentOutput : task.spec.input;
}

/** Outputs of the stages that did not fail, by node id (later stages of the same node win). */
export function stageOutputs(task: WorkflowTask): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const stage of task.history) if (stage.nodeStatus !== 'failure') out[stage.nodeId] = stage.output;
  return out;
}

/** The request text of a run: a string input, an input's `request` string, else the input as JSON. */
export function normalizeRequest(input: unknown): string {
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

/** The spec options of a run given none: one frozen object, not a new empty one per run. */
const noSpecOptions: SpecOptions = Object.freeze({});

/** The task spec of a root task from `run` options. */
export function rootSpec(taskId: string, input: unknown, spec: SpecOptions = noSpecOptions): TaskSpec {
  return specWithDefaults(taskId, normalizeRequest(input), input, spec);
}

/** An id generator that can be handed the time, when its caller has just read `Date.now()`. */
export type RunIdGenerator = (prefix?: string, nowMs?: number) => string;

/**
 * Task ids: `<prefix>_<ms since epoch, base 36><8 random hex chars per engine><counter, base 36>`. Unique
 * across processes sharing a database, time-ordered, and without a random draw per run (the default
 * util generator draws 8 random bytes per id, a measurable cost on the per-run hot path). `nowMs`: the
 * caller's reading of `now()` for the id, when it has just taken one.
 */
export function createRunIdGenerator(now: () => number = Date.now): RunIdGenerator {
  const instance = randomBytes(4).toString('hex');
  let counter = 0;
  // Ids made within one millisecond share its base-36 text, converted once.
  let lastMs = Number.NaN;
  let lastText = '';
  return (prefix = 'id', nowMs) => {
    const ms = nowMs ?? now();
    if (ms !== lastMs) {
      lastMs = ms;
      lastText = ms.toString(36);
    }
    return `${prefix}_${lastText}${instance}${(counter++).toString(36)}`;
  };
}
