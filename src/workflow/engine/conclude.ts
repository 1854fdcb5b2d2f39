import { WorkflowErrorCodes } from '../error-codes.js';
import { outcomeOf, type TaskState, type WorkflowTask } from '../task.js';
import { cleanTask, type EngineCore } from './core.js';
import { type MergeInput, queueStage, type Run, settledState } from './run-state.js';

/**
 * Ends a task: sets its terminal state, reports it, writes it, and — for a child — lets its parent move on
 * once all its siblings have ended too. A concluded task is never concluded again. `now` is the time the
 * caller already read when the end follows from what it just recorded (the stage that reached an EXIT).
 */
export function conclude(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  state: TaskState,
  error?: WorkflowTask['error'],
  now: number = core.clock.now(),
): void {
  if (task.lifecycle === 'concluded') return;
  task.state = state;
  task.lifecycle = 'concluded';
  if (error) task.error = error;
  task.completedAt = task.updatedAt = now;
  const outcome = outcomeOf(state)!;
  const payload: Record<string, unknown> = { status: outcome, state };
  if (task.error) payload.error = task.error;
  if (task.parentTaskId) payload.parentTaskId = task.parentTaskId;
  core.emitter.emit(
    run,
    outcome === 'failure' ? 'task_failed' : 'task_completed',
    task.taskId,
    task.currentStageId,
    payload,
    now,
  );
  if (core.durable) core.persist(run, (store) => store.saveTask(cleanTask(core, task), { concludes: true }));
  if (task.parentTaskId) childSettled(core, run, task);
}

/** Concludes every task of the run still open (cancel, crash). */
export function concludeOpen(
  core: EngineCore,
  run: Run,
  state: TaskState,
  error: NonNullable<WorkflowTask['error']>,
): void {
  for (const task of run.tasks.values())
    if (task.lifecycle !== 'concluded') conclude(core, run, task, state, error);
}

/** What a MERGE receives for one ended child. */
export function mergeInputOf(child: WorkflowTask, now: number): MergeInput {
  const last = child.history.length - 1;
  const input: MergeInput = {
    task_id: child.taskId,
    node_id: child.history[last]?.nodeId,
    status: outcomeOf(child.state) ?? 'failure',
    output: child.currentOutput ?? null,
    stage_result_index: last,
    timestamp: child.completedAt ?? now,
    lineage_metadata: {
      type: child.lineageType,
      parent_task_id: child.parentTaskId,
      ...child.lineageMetadata,
    },
  };
  if (child.error) input.error = { code: child.error.code, message: child.error.message };
  return input;
}

/**
 * How a fan-out parent ends when its children ended without a MERGE: a BRANCH succeeds when any clone did,
 * a SPLIT only when every subtask did (partial when some did).
 */
export function fanOutState(
  parent: WorkflowTask,
  inputs: ReadonlyArray<Pick<MergeInput, 'status'>>,
): TaskState {
  const successes = inputs.filter((input) => input.status === 'success').length;
  const partials = inputs.filter((input) => input.status === 'partial').length;
  if (parent.fanOut?.role === 'branch')
    return successes > 0 ? settledState(parent) : partials > 0 ? 'partial' : 'failed';
  if (successes === inputs.length) return settledState(parent);
  return successes + partials === 0 ? 'failed' : 'partial';
}

/** Called when a child ends: once all children of its suspended parent have, the parent resumes or ends. */
export function childSettled(core: EngineCore, run: Run, child: WorkflowTask): void {
  const parent = run.tasks.get(child.parentTaskId!);
  if (parent?.lifecycle !== 'suspended') return;
  const children = parent.childTaskIds.map((id) => run.tasks.get(id)!);
  if (children.some((candidate) => candidate.lifecycle !== 'concluded')) return;
  const now = core.clock.now();
  const inputs = children.map((candidate) => mergeInputOf(candidate, now));
  const merges = [
    ...new Set(
      children.map((candidate) => candidate.arrivedAtMerge).filter((id): id is string => id !== undefined),
    ),
  ];
  parent.lifecycle = 'active';
  parent.updatedAt = now;
  if (merges.length > 1) {
    conclude(core, run, parent, 'failed', {
      code: WorkflowErrorCodes.mergeConflict,
      message: `the children of ${parent.taskId} reached different MERGE nodes (${merges.join(', ')}); a fan-out must join at one merge`,
    });
    return;
  }
  if (merges.length === 1) {
    run.pendingMerges ??= new Map();
    run.pendingMerges.set(parent.taskId, inputs);
    queueStage(run, parent, merges[0]!);
    return;
  }
  // No merge: every child ended at an EXIT or failed.
  parent.currentOutput = inputs;
  const state = fanOutState(parent, inputs);
  conclude(
    core,
    run,
    parent,
    state,
    state === 'failed'
      ? {
          code: WorkflowErrorCodes.childrenFailed,
          message: `all ${inputs.length} children of ${parent.taskId} failed`,
        }
      : undefined,
  );
}
