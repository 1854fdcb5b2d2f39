import { ErrorCodes, UserInputError } from '../../util/index.js';
import { errorShape } from '../agent-node.js';
import { type AssembledContext, assembleContext, type ContextItem } from '../context.js';
import type { DagNode } from '../dag.js';
import { WorkflowErrorCodes } from '../error-codes.js';
import type { StageRecord, ToolCallRecord, WorkflowOutcome, WorkflowTask } from '../task.js';
import { conclude } from './conclude.js';
import { type EngineCore, policyDenial } from './core.js';
import { decisionLabel, route, selectEdge, splitItemsOf } from './route.js';
import { runBody } from './run-body.js';
import { type MergeInput, nodeInput, type Run } from './run-state.js';

type StageError = { code: string; message: string };

/** The policy's verdict on the node or context profile, reported as `policy_denied` when it denies. */
function denied(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  target: 'node' | 'context',
  targetId: string,
) {
  const denial = policyDenial(core, target, targetId);
  if (!denial) return undefined;
  core.emitter.emit(run, 'policy_denied', task.taskId, node.id, {
    target,
    targetId,
    policy: denial.policy,
    reason: denial.reason,
  });
  return denial;
}

type StageContext = { items: ContextItem[]; metadata: Record<string, unknown> | undefined };
/** What a node with `context: none` gets; shared, so the common case allocates nothing. */
const noContext: StageContext = Object.freeze({
  items: Object.freeze([]) as unknown as ContextItem[],
  metadata: undefined,
});

/** The node's context profile assembled from the memory stores (the caller handles `context: none`). */
async function stageContext(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  input: unknown,
): Promise<StageContext> {
  const profile = core.profiles.get(node.manifest.context)!;
  const denial = denied(core, run, task, node, 'context', profile.id);
  if (denial) {
    core.emitter.emit(run, 'context_failed', task.taskId, node.id, {
      profileId: profile.id,
      reason: 'policy_denied',
    });
    throw new UserInputError({
      code: WorkflowErrorCodes.policyDenied,
      message: `context profile "${profile.id}" is denied by policy "${denial.policy}"`,
    });
  }
  let assembled: AssembledContext;
  try {
    assembled = await assembleContext({
      profile,
      stores: core.stores,
      taskId: task.taskId,
      query: typeof input === 'string' ? input : JSON.stringify(input ?? null),
    });
  } catch (error) {
    core.emitter.emit(run, 'context_failed', task.taskId, node.id, {
      profileId: profile.id,
      reason: errorShape(error).message,
    });
    throw error;
  }
  const metadata = assembled.metadata as unknown as Record<string, unknown>;
  core.emitter.emit(run, 'context_assembled', task.taskId, node.id, metadata);
  return { items: assembled.items, metadata };
}

/**
 * Applies the MERGE's `merge_failure_mode` to its children's results: throws when the merge cannot run,
 * returns whether its result is partial.
 */
export function checkMergeInputs(node: DagNode, inputs: ReadonlyArray<MergeInput>): boolean {
  const failures = inputs.filter((entry) => entry.status === 'failure').length;
  const mode = node.manifest.merge_failure_mode;
  if (mode === 'fail_on_any' && failures > 0) {
    throw new UserInputError({
      code: WorkflowErrorCodes.mergeChildFailed,
      message: `${failures} of ${inputs.length} children failed (merge_failure_mode fail_on_any)`,
    });
  }
  if (failures === inputs.length) {
    throw new UserInputError({
      code: WorkflowErrorCodes.mergeChildFailed,
      message: `all ${inputs.length} children failed`,
    });
  }
  return mode === 'partial' && (failures > 0 || inputs.some((entry) => entry.status === 'partial'));
}

function checkSchema(core: EngineCore, schemaId: string, value: unknown, code: string, what: string): void {
  const problem = core.schemaChecks.get(schemaId)!(value);
  if (problem) throw new UserInputError({ code, message: `${what} does not match ${schemaId}: ${problem}` });
}

/**
 * Everything a stage does before it is recorded; throws (or rejects with) the stage's failure. What it
 * finds goes straight into the stage's record, made when the stage started: the output, the context
 * metadata, and `partial` as the node status (a failure overrides both when the stage is recorded). A
 * promise only when there is something to wait for (a context profile, a body that returns one): each
 * await would be a turn of the microtask queue on every stage.
 */
function performStage(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  input: unknown,
  mergeInputs: MergeInput[] | undefined,
  calls: ToolCallRecord[],
  stage: StageRecord,
): Promise<void> | undefined {
  // policyDenial keeps the policy's verdicts: asking again at every stage is a lookup.
  const nodeDenial = denied(core, run, task, node, 'node', node.id);
  if (nodeDenial) {
    throw new UserInputError({
      code: WorkflowErrorCodes.policyDenied,
      message: `node "${node.id}" is denied by policy "${nodeDenial.policy}"`,
    });
  }
  if (node.manifest.context === 'none')
    return performBody(core, run, task, node, input, mergeInputs, calls, stage, noContext);
  return performWithContext(core, run, task, node, input, mergeInputs, calls, stage);
}

// The continuations below are functions of their own: a closure in the function that usually answers at
// once would give every call of it a context object for the variables the closure captures.

/** `performBody` once the node's context profile is assembled. */
function performWithContext(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  input: unknown,
  mergeInputs: MergeInput[] | undefined,
  calls: ToolCallRecord[],
  stage: StageRecord,
): Promise<void> {
  return stageContext(core, run, task, node, input).then((context) =>
    performBody(core, run, task, node, input, mergeInputs, calls, stage, context),
  );
}

/** The stage once its context is known: input checks, the merge rules, the body and the output checks. */
function performBody(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  input: unknown,
  mergeInputs: MergeInput[] | undefined,
  calls: ToolCallRecord[],
  stage: StageRecord,
  context: StageContext,
): Promise<void> | undefined {
  const manifest = node.manifest;
  stage.contextMetadata = context.metadata;
  if (manifest.inputs_schema_id && !mergeInputs)
    checkSchema(
      core,
      manifest.inputs_schema_id,
      input,
      WorkflowErrorCodes.inputInvalid,
      `input of node "${node.id}"`,
    );
  if (mergeInputs) {
    if (checkMergeInputs(node, mergeInputs)) stage.nodeStatus = 'partial';
    core.emitter.emit(run, 'routing_merge', task.taskId, node.id, {
      children: mergeInputs.length,
      failures: mergeInputs.filter((entry) => entry.status === 'failure').length,
      mode: manifest.merge_failure_mode,
    });
  }
  if (node.role === 'exit' || (node.role === 'merge' && !mergeInputs)) {
    // EXIT is read-only; a MERGE reached without children (e.g. after a DECISION) passes the output through.
    stage.output = input;
  } else {
    const body = runBody(core, run, task, node, input, context.items, calls, mergeInputs !== undefined);
    if (body instanceof Promise) return outputWhenDone(core, node, stage, calls, body);
    takeOutput(stage, body, calls);
  }
  checkOutput(core, node, stage.output);
  return undefined;
}

/** The output of a body that had something to wait for, taken and checked once it came. */
function outputWhenDone(
  core: EngineCore,
  node: DagNode,
  stage: StageRecord,
  calls: ToolCallRecord[],
  body: Promise<unknown>,
): Promise<void> {
  return body.then((output) => {
    takeOutput(stage, output, calls);
    checkOutput(core, node, stage.output);
  });
}

/** The body's output into the record; a tool call that failed without misuse makes the stage partial. */
function takeOutput(stage: StageRecord, output: unknown, calls: ReadonlyArray<ToolCallRecord>): void {
  stage.output = output === undefined ? null : output;
  if (calls.length > 0 && calls.some((call) => call.status === 'failure')) stage.nodeStatus = 'partial';
}

/**
 * The output schema, and that a DECISION's output selects one of its edges and a SPLIT's has items to fan
 * out over (`endStage` reads them off the output again to route: two small pure functions, where keeping
 * them would be an object per stage).
 */
function checkOutput(core: EngineCore, node: DagNode, output: unknown): void {
  const manifest = node.manifest;
  if (manifest.outputs_schema_id && node.role !== 'exit')
    checkSchema(
      core,
      manifest.outputs_schema_id,
      output,
      WorkflowErrorCodes.outputInvalid,
      `output of node "${node.id}"`,
    );
  if (node.role === 'decision') {
    const label = decisionLabel(output);
    if (!selectEdge(node, label)) {
      const known = node.outEdges.map((edge) => edge.label ?? edge.condition).join(', ');
      throw new UserInputError({
        code: WorkflowErrorCodes.routeUnknownLabel,
        message: `DECISION "${node.id}" selected ${label === undefined ? 'no label' : `"${label}"`}; expected one of ${known}`,
      });
    }
  } else if (node.role === 'split') {
    const items = splitItemsOf(output);
    if (!items || items.length === 0) {
      throw new UserInputError({
        code: WorkflowErrorCodes.splitInvalidOutput,
        message: `SPLIT "${node.id}" must output a non-empty list or {subtask_inputs: [...]}`,
      });
    }
  }
}

/**
 * What every stage of a node reports the same way, built once per node and engine: the `node_started`
 * payload, the artifact metadata per status (frozen, since every event and artifact of the node shares
 * them) and the node's metrics (no lookup by name and label per stage).
 */
interface NodeStatics {
  /** Whether the node's body can call tools (an agent, or a node with tools): else its stages record none. */
  recordsCalls: boolean;
  started: Readonly<Record<string, unknown>>;
  artifactMetadata: Readonly<Record<WorkflowOutcome, Readonly<Record<string, unknown>>>>;
  duration: (ms: number) => void;
  executions: Readonly<Record<WorkflowOutcome, (by?: number) => void>>;
}
// Weak on both keys: a closed engine, or a workflow whose manifest was replaced, takes its statics with it.
const staticsCache = new WeakMap<EngineCore, WeakMap<DagNode, NodeStatics>>();
function staticsOf(core: EngineCore, node: DagNode): NodeStatics {
  let ofEngine = staticsCache.get(core);
  if (!ofEngine) {
    ofEngine = new WeakMap();
    staticsCache.set(core, ofEngine);
  }
  let statics = ofEngine.get(node);
  if (!statics) {
    const metadata = (status: WorkflowOutcome) => Object.freeze({ status, role: node.role });
    const executions = (status: WorkflowOutcome) =>
      core.metrics.counter('node.executions', `node=${node.id},status=${status}`);
    statics = Object.freeze({
      recordsCalls: node.manifest.kind === 'agent' || node.manifest.tools.length > 0,
      started: Object.freeze({ role: node.role, kind: node.manifest.kind }),
      artifactMetadata: Object.freeze({
        success: metadata('success'),
        failure: metadata('failure'),
        partial: metadata('partial'),
      }),
      duration: core.metrics.timer('node.duration_ms', `node=${node.id}`),
      executions: Object.freeze({
        success: executions('success'),
        failure: executions('failure'),
        partial: executions('partial'),
      }),
    });
    ofEngine.set(node, statics);
  }
  return statics;
}

/**
 * Queues the stage row. Without redaction the row also stands for the stage's two events and its
 * `node_output` artifact (all made from the record when read back), so those are not written again at the
 * end of the run; with redaction they are, as redacted copies.
 */
function persistStage(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  stage: StageRecord,
  startSeq: number,
  endSeq: number,
): void {
  const redact = core.redact;
  if (redact) {
    core.persist(run, (store) => store.appendStage(task, redact(stage)));
    return;
  }
  run.coveredSeqs.push(startSeq, endSeq);
  core.persist(run, (store) => store.appendStage(task, stage, startSeq, endSeq));
}

/** Roles whose `continue_on_failure` lets the task go on along their single out-edge. */
function mayContinue(node: DagNode, error: StageError): boolean {
  return (
    node.manifest.continue_on_failure === true &&
    error.code !== ErrorCodes.aborted &&
    (node.role === 'start' || node.role === 'linear' || node.role === 'merge' || node.role === 'branch')
  );
}

/**
 * Executes one node for one task: runs the stage, records it (history, metrics, artifact, database, task
 * memory), and then either concludes the task on a failure or routes it on. The clock is read twice per
 * stage (start and end; `startedAt` when the caller has just read it) and every record of the stage uses
 * those two readings. A promise only when the stage has something to wait for (a context profile, a body
 * that returns one, task memory): a stage that answers at once is done when this returns, without a turn
 * of the microtask queue of its own.
 */
export function executeStage(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  startedAt: number = core.clock.now(),
): Promise<void> | undefined {
  const manifest = node.manifest;
  const statics = staticsOf(core, node);
  task.lifecycle = 'active';
  if (task.state === 'pending') task.state = 'in_progress';
  task.currentStageId = node.id;
  const mergeInputs = node.role === 'merge' ? run.pendingMerges?.get(task.taskId) : undefined;
  if (mergeInputs) run.pendingMerges!.delete(task.taskId);
  const input = mergeInputs ? { merge_inputs: mergeInputs } : nodeInput(task);
  // Only agents and tools record calls: every other stage shares one empty, frozen list.
  const calls: ToolCallRecord[] = statics.recordsCalls ? [] : noCalls;
  // Made now and completed in place when the stage ends: the stage's events are built from it (see
  // `emitter.stage`). Its fields are all set here, in the order the record has always been written in.
  const stage: StageRecord = {
    index: task.history.length,
    nodeId: node.id,
    nodeRole: node.role,
    nodeKind: manifest.kind,
    input,
    output: null,
    nodeStatus: 'success',
    toolCalls: calls,
    contextProfileId: manifest.context,
    contextMetadata: undefined,
    startedAt,
    completedAt: startedAt,
  };
  const startSeq = core.emitter.stage(run, task, stage, false, statics.started);

  let pending: Promise<void> | undefined;
  try {
    pending = performStage(core, run, task, node, input, mergeInputs, calls, stage);
  } catch (caught) {
    return recordStage(core, run, task, node, statics, stage, startSeq, stageError(core, run, caught));
  }
  if (pending) return recordWhenDone(core, run, task, node, statics, stage, startSeq, pending);
  return recordStage(core, run, task, node, statics, stage, startSeq, undefined);
}

/** `recordStage` once a stage that had something to wait for has ended. */
function recordWhenDone(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  statics: NodeStatics,
  stage: StageRecord,
  startSeq: number,
  pending: Promise<void>,
): Promise<void> {
  return pending.then(
    () => recordStage(core, run, task, node, statics, stage, startSeq, undefined),
    (caught) => recordStage(core, run, task, node, statics, stage, startSeq, stageError(core, run, caught)),
  );
}

const noCalls: ToolCallRecord[] = Object.freeze([]) as unknown as ToolCallRecord[];

/** What a stage's failure says: the cancel when the run was cancelled, redacted when there are secrets. */
function stageError(core: EngineCore, run: Run, caught: unknown): StageError {
  let error: StageError = errorShape(caught);
  if (run.cancelled) error = { code: ErrorCodes.aborted, message: 'the run was cancelled' };
  if (core.redact) error = { code: error.code, message: core.redactText(error.message) };
  return error;
}

/** The stage has ended: completes its record and everything made from it, then ends or routes the task. */
function recordStage(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  statics: NodeStatics,
  stage: StageRecord,
  startSeq: number,
  error: StageError | undefined,
): Promise<void> | undefined {
  const completedAt = core.clock.now();
  const startedAt = stage.startedAt;
  if (error) {
    stage.output = null;
    stage.nodeStatus = 'failure';
    stage.error = error;
  }
  stage.completedAt = completedAt;
  task.history.push(stage);
  task.updatedAt = completedAt;
  // A DECISION routes and does not transform: its verdict stays in the stage record, the payload flows on.
  if (!error && node.role !== 'decision') task.currentOutput = stage.output;
  statics.duration(completedAt - startedAt);
  statics.executions[stage.nodeStatus]();
  if (task === run.root && !core.redact) core.artifacts.addRootStage(task.taskId, stage);
  else
    core.artifacts.add({
      artifactId: `${task.taskId}:${stage.index}`,
      rootTaskId: run.root.taskId,
      taskId: task.taskId,
      nodeId: node.id,
      type: 'node_output',
      createdAt: completedAt,
      payload: core.redact ? core.redact(stage.output) : stage.output,
      metadata: statics.artifactMetadata[stage.nodeStatus],
    });
  if (core.workflow.memory.taskStoreRead && !error && node.role !== 'exit')
    return endAfterMemory(core, run, task, node, statics, stage, startSeq);
  endStage(core, run, task, node, statics, stage, startSeq, error);
  return undefined;
}

/** A successful stage's output into task memory, then `endStage`. */
function endAfterMemory(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  statics: NodeStatics,
  stage: StageRecord,
  startSeq: number,
): Promise<void> {
  return core
    .addMemory('task', stage.output, { taskId: task.taskId, tags: [node.id, 'stage_output'] })
    .then(() => endStage(core, run, task, node, statics, stage, startSeq, undefined));
}

/** Reports the stage's end, queues its row, and concludes the task on a failure or routes it on. */
function endStage(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  statics: NodeStatics,
  stage: StageRecord,
  startSeq: number,
  error: StageError | undefined,
): void {
  const completedAt = stage.completedAt;
  if (error) task.failureSignatures.push(`${node.id}:${error.code}`);
  const endSeq = core.emitter.stage(run, task, stage, true, statics.started);
  // Guarded here rather than only inside `persist`: the closure alone is an allocation per stage.
  if (core.durable) persistStage(core, run, task, stage, startSeq, endSeq);
  if (error) {
    if (!mayContinue(node, error)) {
      conclude(
        core,
        run,
        task,
        error.code === ErrorCodes.aborted ? 'cancelled' : 'failed',
        { ...error, nodeId: node.id },
        completedAt,
      );
      return;
    }
    task.toleratedFailure = true;
  } else if (stage.nodeStatus === 'partial') task.toleratedFailure = true;
  const role = node.role;
  route(
    core,
    run,
    task,
    node,
    role === 'decision' ? selectEdge(node, decisionLabel(stage.output)) : undefined,
    role === 'split' ? splitItemsOf(stage.output) : undefined,
    completedAt,
  );
}
