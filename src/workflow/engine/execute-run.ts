import { errorCodeOf } from '../../telemetry/index.js';
import { deepFreeze, ErrorCodes } from '../../util/index.js';
import { errorShape } from '../agent-node.js';
import { telemetrySnapshotId } from '../artifacts.js';
import type { DagNode } from '../dag.js';
import { WorkflowErrorCodes } from '../error-codes.js';
import type { LoadedWorkflow } from '../loader.js';
import { outcomeOf, type WorkflowTask } from '../task.js';
import { conclude, concludeOpen } from './conclude.js';
import { cleanTask, type EngineCore } from './core.js';
import { executeStage } from './execute-stage.js';
import { nextStage, noWrites, type Run } from './run-state.js';
import { traceNode } from './tracing.js';
import type { WorkflowRunResult } from './types.js';

/** Where the deliberate turn after a run's first stage starts from: one settled promise for every run. */
const settled: Promise<void> = Promise.resolve();

/**
 * Drives one run from its START node until no stage is left: stages run one at a time in queue order
 * (clones and subtasks interleave by the order they were queued). Ends every task still open — cancelled
 * when the run was, failed when the queue drained without reaching an EXIT or a step threw — and then
 * calls `end` with the run, whose value the promise resolves with (a function of the engine's, not a
 * closure per run).
 *
 * Not an async function, and `end` is called here rather than in a reaction of the caller's: each of those
 * is a promise more per run (with `await`, two), and where an async hook is installed (any
 * AsyncLocalStorage in the process) every promise also costs a call of the hook and fields of its own. A
 * run whose stages answer at once makes one promise here: the turn after its first stage.
 */
export function executeRun<T = undefined>(
  core: EngineCore,
  run: Run,
  at?: number,
  end: (run: Run) => T = () => undefined as T,
): Promise<T> {
  let outcome: T | Promise<T>;
  try {
    outcome = startRun(core, run, at, end);
  } catch (error) {
    // Reporting the start failed: the run fails as when a stage crashes.
    crashed(core, run, error);
    outcome = end(run);
  }
  return outcome instanceof Promise ? outcome : Promise.resolve(outcome);
}

/** Reports the run started and executes its stages (see `runStages`). */
function startRun<T>(
  core: EngineCore,
  run: Run,
  at: number | undefined,
  end: (run: Run) => T,
): T | Promise<T> {
  const { root } = run;
  root.lifecycle = 'active';
  root.state = 'in_progress';
  // The START stage begins at the moment the run is reported started: one clock reading for both (`at`,
  // the scheduler's, when it has just read the clock to start the run). Later stages begin when the one
  // before them ended, when nothing ran between them.
  const startedAt = at ?? core.clock.now();
  core.emitter.emit(
    run,
    'task_started',
    root.taskId,
    undefined,
    { startNodeId: run.startNodeId, request: root.spec.request },
    startedAt,
  );
  if (core.durable) core.persist(run, (store) => store.saveTask(cleanTask(core, root)));
  // The queue starts as a two-entry array holding the first stage (see `queueStage`), not as a push onto an
  // empty one, which would make room for eighteen: a chain's queue never holds more than the one stage.
  run.queue = [root, run.startNodeId];
  return runStages(core, run, startedAt, true, end);
}

/**
 * Executes the queued stages while they answer at once; a promise of the rest when one has something to
 * wait for, and — while `first` — after the first stage, so that `enqueue` hands the run back to its caller
 * there, able to cancel it, as when every stage took a turn. Ends the run (see `executeRun`) when the queue
 * is empty, and on a crash.
 */
function runStages<T>(
  core: EngineCore,
  run: Run,
  startedAt: number | undefined,
  first: boolean,
  end: (run: Run) => T,
): T | Promise<T> {
  try {
    const nodes = core.workflow.dag.nodes;
    for (let task = nextStage(run); task && !run.cancelled; task = nextStage(run)) {
      if (task.lifecycle === 'concluded') continue;
      const node = nodes.get(run.nextNodeId)!;
      const pending = run.traced
        ? tracedStage(core, run, task, node, startedAt)
        : executeStage(core, run, task, node, startedAt);
      if (pending) return continueAfter(core, run, pending, first, end);
      if (first) return continueAfter(core, run, settled, false, end);
      // Nothing ran in between but routing: the next stage starts when this one was recorded as ending.
      startedAt = task.history[task.history.length - 1]!.completedAt;
    }
    if (run.cancelled) {
      concludeOpen(core, run, 'cancelled', { code: ErrorCodes.aborted, message: 'the run was cancelled' });
    } else if (run.root.lifecycle !== 'concluded') {
      // Only reachable through a defect: the queue drained with the root still open.
      conclude(core, run, run.root, 'failed', {
        code: ErrorCodes.internal,
        message: 'the run ended without reaching an EXIT',
      });
    }
  } catch (error) {
    crashed(core, run, error);
  }
  return end(run);
}

/** The rest of the run once `pending` settles; a rejection is a crash. */
function continueAfter<T>(
  core: EngineCore,
  run: Run,
  pending: Promise<void>,
  first: boolean,
  end: (run: Run) => T,
): Promise<T> {
  return pending.then(
    () => runStages(core, run, undefined, first, end),
    (error) => {
      crashed(core, run, error);
      return end(run);
    },
  );
}

/** A step threw: every task still open fails. */
function crashed(core: EngineCore, run: Run, error: unknown): void {
  core.logger.error({ err: error, rootTaskId: run.root.taskId }, 'workflow run crashed');
  concludeOpen(core, run, 'failed', { code: ErrorCodes.internal, message: errorShape(error).message });
}

/**
 * A stage in its span. A function of its own so that the loop's variables are not captured by a closure:
 * that would give every iteration of the loop a context object, traced or not.
 */
function tracedStage(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  startedAt: number | undefined,
): Promise<void> {
  return traceNode(task, node, () => executeStage(core, run, task, node, startedAt));
}

/**
 * The telemetry snapshot's metadata, the workflow's: one copy, frozen all the way down, shared by every run's
 * snapshot, as node_output artifacts share theirs (and written from its JSON made once, see `encodeRunRecords`).
 */
const snapshotMetadata = new WeakMap<LoadedWorkflow, Readonly<Record<string, unknown>>>();
function snapshotMetadataOf(workflow: LoadedWorkflow): Readonly<Record<string, unknown>> {
  let metadata = snapshotMetadata.get(workflow);
  if (!metadata) {
    metadata = deepFreeze({ ...structuredClone(workflow.metadata) });
    snapshotMetadata.set(workflow, metadata);
  }
  return metadata;
}

/** The completion metric's labels, by outcome: not a new string to build and hash at the end of every run. */
const completionLabels: Readonly<Record<string, string>> = Object.freeze({
  success: 'status=success',
  failure: 'status=failure',
  partial: 'status=partial',
  undefined: 'status=undefined',
});

/**
 * Closes a run whose tasks have all ended: its telemetry snapshot, the completion metric and the end-of-run
 * records; gives the result, for `settleRun`.
 */
export function finishRun(core: EngineCore, run: Run): WorkflowRunResult {
  const { root } = run;
  const { workflow } = core;
  run.finished = true;
  // Made when first read: the run's events no longer change, and most runs' snapshots are never read.
  const snapshotAt = root.completedAt ?? core.clock.now();
  core.artifacts.addLater(root.taskId, () => ({
    artifactId: telemetrySnapshotId(root.taskId),
    rootTaskId: root.taskId,
    taskId: root.taskId,
    nodeId: undefined,
    type: 'telemetry_snapshot',
    createdAt: snapshotAt,
    payload: { eventCounts: core.emitter.countsOf(run), events: run.seq },
    metadata: snapshotMetadataOf(workflow),
  }));
  core.metrics.increment('task.completions', completionLabels[outcomeOf(root.state) ?? 'undefined']);
  if (core.durable) {
    // What the stage rows do not already stand for (see `persistStage`).
    const events = core.emitter.eventsBesides(run, run.coveredSeqs);
    const artifacts = core.artifacts.forRun(root.taskId, core.redact !== undefined);
    core.persist(run, (store) => store.saveRunRecords(root.taskId, events, artifacts));
  }
  let stagesExecuted = 0;
  for (const task of run.tasks.values()) stagesExecuted += task.history.length;
  const output = root.currentOutput ?? null;
  const result: WorkflowRunResult = {
    taskId: root.taskId,
    workflowId: workflow.id,
    status: outcomeOf(root.state) ?? 'failure',
    state: root.state,
    output: core.redact ? core.redact(output) : output,
    stagesExecuted,
    childTaskIds: root.childTaskIds.slice(),
    startedAt: root.createdAt,
    completedAt: root.completedAt ?? core.clock.now(),
    metadata: workflow.metadata,
  };
  if (root.error) result.error = root.error;
  return result;
}

/**
 * Resolves the run's result: at once when it has nothing to write (an in-memory run), else once its
 * writes landed, so `inspect` from the database sees the whole run. The executor is told of the end
 * before this (see `JobHandle`), so a run started when this result arrives is not queued behind it.
 * Writes that failed (a full disk) are named in the result (`recordsNotWritten`): a caller told of a
 * finished run must not take it for one a restart still finds.
 */
export function settleRun(run: Run, result: WorkflowRunResult): void {
  if (run.persistQueue === noWrites) run.resolve(result);
  else run.persistQueue.then(() => run.resolve(withUnwritten(run, result)));
}

function withUnwritten(run: Run, result: WorkflowRunResult): WorkflowRunResult {
  const unwritten = run.unwritten;
  if (!unwritten) return result;
  // The store's code (STORE_UNAVAILABLE for a full disk), not its message, which names paths.
  const cause = errorCodeOf(unwritten.error);
  result.recordsNotWritten = {
    code: WorkflowErrorCodes.recordsNotWritten,
    message: `${unwritten.count} of this run's record writes failed (${cause}): the database does not hold the whole run, and a restart will not find it as it ended`,
    failedWrites: unwritten.count,
    cause,
  };
  return result;
}
