import type { DagNode } from '../dag.js';
import { WorkflowErrorCodes } from '../error-codes.js';
import type { WorkflowEdgeManifest } from '../manifest-schemas.js';
import type { RoutingStep, WorkflowTask } from '../task.js';
import { conclude } from './conclude.js';
import { addTask, cleanTask, type EngineCore } from './core.js';
import { queueStage, type Run, settledState } from './run-state.js';

/** The label a DECISION's output selects: a string output, or one of the usual keys of an object output. */
export function decisionLabel(output: unknown): string | undefined {
  if (typeof output === 'object' && output !== null && !Array.isArray(output)) {
    const record = output as Record<string, unknown>;
    for (const key of ['selected_edge', 'selected_edge_label', 'condition', 'route', 'next']) {
      const value = record[key];
      if (typeof value === 'string') return value;
    }
    return undefined;
  }
  return output === undefined || output === null ? undefined : String(output);
}

/** The out-edge whose label (or condition) matches: exactly first, then ignoring case. */
export function selectEdge(node: DagNode, label: string | undefined): WorkflowEdgeManifest | undefined {
  if (label === undefined) return undefined;
  const wanted = label.trim();
  const exact = node.outEdges.find((edge) => (edge.label ?? edge.condition) === wanted);
  if (exact) return exact;
  const lower = wanted.toLowerCase();
  return node.outEdges.find((edge) => (edge.label ?? edge.condition)!.toLowerCase() === lower);
}

/** The items a SPLIT fans out over: a list output or `{subtask_inputs: [...]}`; undefined when neither. */
export function splitItemsOf(output: unknown): unknown[] | undefined {
  if (Array.isArray(output)) return output;
  if (
    typeof output === 'object' &&
    output !== null &&
    Array.isArray((output as { subtask_inputs?: unknown }).subtask_inputs)
  )
    return (output as { subtask_inputs: unknown[] }).subtask_inputs;
  return undefined;
}

/**
 * The routing-trace step of following an edge, the same for every task that follows it: made once per edge
 * and shared (frozen) by every run's trace, which keeps them for as long as their runs are retained.
 */
const steps = new WeakMap<WorkflowEdgeManifest, RoutingStep>();
function stepOf(from: DagNode, edge: WorkflowEdgeManifest): RoutingStep {
  let step = steps.get(edge);
  if (!step) {
    step = Object.freeze(
      edge.label
        ? { from: from.id, to: edge.to, role: from.role, label: edge.label }
        : { from: from.id, to: edge.to, role: from.role },
    );
    steps.set(edge, step);
  }
  return step;
}

/**
 * Follows one edge: queues the target, or — for a child reaching a MERGE — hands the child to its parent.
 * `now` is when the stage that routes here completed.
 */
export function advance(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  from: DagNode,
  edge: WorkflowEdgeManifest,
  now?: number,
): void {
  task.routingTrace.push(stepOf(from, edge));
  const target = core.workflow.dag.nodes.get(edge.to)!;
  if (target.role === 'merge' && task.parentTaskId !== undefined) {
    // Inside a clone or subtask the first MERGE reached collects the child into its parent.
    task.arrivedAtMerge = target.id;
    conclude(core, run, task, settledState(task), undefined, now);
    return;
  }
  queueStage(run, task, edge.to);
}

function suspend(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  role: 'branch' | 'split',
): void {
  task.fanOut = { nodeId: node.id, role };
  task.lifecycle = 'suspended';
  core.persist(run, (store) => store.saveTask(cleanTask(core, task)));
}

/**
 * Moves a task on after a successful (or tolerated) stage, by the node's role: EXIT concludes, DECISION
 * follows the selected edge, BRANCH clones the task per edge, SPLIT creates a subtask per item, and every
 * other role follows its single edge. `now` is when that stage completed (read once by the caller).
 */
export function route(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  selected: WorkflowEdgeManifest | undefined,
  splitItems: unknown[] | undefined,
  now?: number,
): void {
  switch (node.role) {
    case 'exit': {
      const state = node.manifest.always_fail ? 'failed' : settledState(task);
      conclude(
        core,
        run,
        task,
        state,
        state === 'failed' && !task.error
          ? {
              code: WorkflowErrorCodes.alwaysFail,
              message: `EXIT "${node.id}" has always_fail`,
              nodeId: node.id,
            }
          : undefined,
        now,
      );
      return;
    }
    case 'decision': {
      const label = (selected!.label ?? selected!.condition)!;
      core.emitter.emit(run, 'routing_decision', task.taskId, node.id, { label, to: selected!.to }, now);
      advance(core, run, task, node, selected!, now);
      return;
    }
    case 'branch':
      branch(core, run, task, node);
      return;
    case 'split':
      split(core, run, task, node, splitItems!);
      return;
    default:
      advance(core, run, task, node, node.outEdges[0]!, now);
  }
}

function branch(core: EngineCore, run: Run, task: WorkflowTask, node: DagNode): void {
  const clones: string[] = [];
  node.outEdges.forEach((edge, index) => {
    const clone = addTask(core, run, {
      taskId: `${task.taskId}-clone-${index}`,
      rootTaskId: task.rootTaskId,
      spec: task.spec,
      parentTaskId: task.taskId,
      lineageType: 'clone',
      lineageMetadata: {
        branch_label: edge.label ?? edge.to,
        cloned_at_stage: node.id,
        clone_index: index,
      },
      currentOutput: structuredClone(task.currentOutput),
      lifecycle: 'active',
    });
    task.childTaskIds.push(clone.taskId);
    clones.push(clone.taskId);
    core.emitter.emit(run, 'clone_created', clone.taskId, node.id, {
      parentTaskId: task.taskId,
      cloneIndex: index,
      edge: edge.to,
      label: edge.label,
    });
    core.persist(run, (store) => store.saveTask(cleanTask(core, clone)));
    task.routingTrace.push({
      from: node.id,
      to: edge.to,
      role: 'branch',
      ...(edge.label ? { label: edge.label } : {}),
      childTaskId: clone.taskId,
    });
    queueStage(run, clone, edge.to);
  });
  suspend(core, run, task, node, 'branch');
  core.emitter.emit(run, 'routing_branch', task.taskId, node.id, { clones });
}

function split(core: EngineCore, run: Run, task: WorkflowTask, node: DagNode, items: unknown[]): void {
  const subtasks: string[] = [];
  const edges = node.outEdges;
  items.forEach((item, index) => {
    // Items are dealt over the out-edges round robin.
    const edge = edges[index % edges.length]!;
    const subtask = addTask(core, run, {
      taskId: `${task.taskId}-subtask-${index}`,
      rootTaskId: task.rootTaskId,
      spec: {
        ...task.spec,
        taskSpecId: `${task.spec.taskSpecId}-subtask-${index}`,
        request: typeof item === 'string' ? item : JSON.stringify(item),
        input: item,
      },
      parentTaskId: task.taskId,
      lineageType: 'subtask',
      lineageMetadata: {
        split_edge_label: edge.label ?? edge.to,
        split_at_stage: node.id,
        subtask_index: index,
        subtask_input: item,
      },
      lifecycle: 'active',
    });
    task.childTaskIds.push(subtask.taskId);
    subtasks.push(subtask.taskId);
    core.emitter.emit(run, 'subtask_created', subtask.taskId, node.id, {
      parentTaskId: task.taskId,
      subtaskIndex: index,
      edge: edge.to,
    });
    core.persist(run, (store) => store.saveTask(cleanTask(core, subtask)));
    task.routingTrace.push({
      from: node.id,
      to: edge.to,
      role: 'split',
      ...(edge.label ? { label: edge.label } : {}),
      childTaskId: subtask.taskId,
    });
    queueStage(run, subtask, edge.to);
  });
  suspend(core, run, task, node, 'split');
  core.emitter.emit(run, 'routing_split', task.taskId, node.id, { subtasks });
}
