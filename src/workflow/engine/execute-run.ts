import { ErrorCodes } from '../../util/index.js';
import { errorShape } from '../agent-node.js';
import type { DagNode } from '../dag.js';
import type { LoadedWorkflow } from '../loader.js';
import { outcomeOf, type WorkflowTask } from '../task.js';
import { conclude, concludeOpen } from './conclude.js';
import { cleanTask, type EngineCore } from './core.js';
import { executeStage } from './execute-stage.js';
import { nextStage, type Run } from './run-state.js';
import { traceNode } from './tracing.js';
import type { WorkflowRunResult } from './types.js';

/**
 * Drives one run from its START node until no stage is left: stages run one at a time in queue order
 * (clones and subtasks interleave by the order they were queued). Ends every task still open — cancelled
 * when the run was, failed when the queue drained without reaching an EXIT or a step threw.
 */
export async function executeRun(core: EngineCore, run: Run, at?: number): Promise<void> {
  const { root } = run;
  root.lifecycle = 'active';
  root.state = 'in_progress';
  // The START stage begins at the moment the run is reported started: one clock reading for both (`at`,
  // the scheduler's, when it has just read the clock to start the run). Later stages begin when the one
  // before them ended, when nothing ran between them.
  let startedAt: number | undefined = at ?? core.clock.now();
  core.emitter.emit(
    run,
    'task_started',
    root.taskId,
    undefined,
    { startNodeId: run.startNodeId, request: root.spec.request },
    startedAt,
  );
  if (core.durable) core.persist(run, (store) => store.saveTask(cleanTask(core, root)));
  run.queue.push({ task: root, nodeId: run.startNodeId });
  const nodes = core.workflow.dag.nodes;
  let first = true;
  try {
    for (let item = nextStage(run); item && !run.cancelled; item = nextStage(run)) {
      if (item.task.lifecycle === 'concluded') continue;
      const node = nodes.get(item.nodeId)!;
      const stageStartedAt = startedAt;
      const { task } = item;
      const pending = run.traced
        ? tracedStage(core, run, task, node, stageStartedAt)
        : executeStage(core, run, task, node, stageStartedAt);
      if (pending) {
        await pending;
        startedAt = undefined;
      } else if (first) {
        // Stages that answer at once follow each other without a turn of the microtask queue, except
        // after the first: `enqueue` hands the run back to its caller there, able to cancel it, as when
        // every stage took a turn.
        first = false;
        await undefined;
        startedAt = undefined;
      } else {
        // Nothing ran in between but routing: the next stage starts when this one was recorded as ending.
        startedAt = task.history[task.history.length - 1]!.completedAt;
      }
    }
    if (run.cancelled) {
      concludeOpen(core, run, 'cancelled', { code: ErrorCodes.aborted, message: 'the run was cancelled' });
    } else if (run.root.lifecycle !== 'concluded') {
      // Only reachable through a defect: the queue drained with the root still open.
      conclude(core, run, root, 'failed', {
        code: ErrorCodes.internal,
        message: 'the run ended without reaching an EXIT',
      });
    }
  } catch (error) {
    core.logger.error({ err: error, rootTaskId: root.taskId }, 'workflow run crashed');
    concludeOpen(core, run, 'failed', { code: ErrorCodes.internal, message: errorShape(error).message });
  }
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
 * The telemetry snapshot's metadata, the workflow's: one frozen copy shared by every run's snapshot, as
 * node_output artifacts share theirs.
 */
const snapshotMetadata = new WeakMap<LoadedWorkflow, Readonly<Record<string, unknown>>>();
function snapshotMetadataOf(workflow: LoadedWorkflow): Readonly<Record<string, unknown>> {
  let metadata = snapshotMetadata.get(workflow);
  if (!metadata) {
    metadata = Object.freeze({ ...workflow.metadata });
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
 * Closes a run whose tasks have all ended: its telemetry snapshot, the completion metric, the end-of-run
 * records, and the result — resolved only after the run's writes landed, so `inspect` from the database
 * sees the whole run.
 */
export function finishRun(core: EngineCore, run: Run): WorkflowRunResult {
  const { root } = run;
  const { workflow } = core;
  run.finished = true;
  // Made when first read: the run's events no longer change, and most runs' snapshots are never read.
  const snapshotAt = root.completedAt ?? core.clock.now();
  core.artifacts.addLater(root.taskId, () => ({
    artifactId: `${root.taskId}:telemetry`,
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
  // Even with nothing to write (an in-memory run) this is a turn later: the executor sees the run end
  // (`execute` returning) before its caller does, so a run started right after it is not queued behind it.
  run.persistQueue.then(() => run.resolve(result));
  return result;
}
