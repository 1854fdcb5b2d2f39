import {
  type Context,
  errorCodeOf,
  isTraced,
  markSpanFailed,
  runInSpan,
  type Span,
  SpanAttributes,
  startSpan,
} from '../../telemetry/index.js';
import type { DagNode } from '../dag.js';
import { outcomeOf, type WorkflowTask } from '../task.js';
import type { EngineCore } from './core.js';
import type { Run } from './run-state.js';

/**
 * A run's `workflow_run {workflow}` span, or undefined when it would be a no-op (no tracer registered, no
 * traced parent): the run's stages then skip their spans too. `parent` is the context of the `enqueue` that
 * accepted the run: the scheduler starts it later, from wherever a slot freed.
 */
export function startRunSpan(core: EngineCore, run: Run, parent: Context): Span | undefined {
  const workflowId = core.workflow.id;
  const span = startSpan(runSpanName(workflowId), {
    parent,
    attributes: {
      [SpanAttributes.workflowId]: workflowId,
      [SpanAttributes.workflowTaskId]: run.root.taskId,
    },
  });
  if (isTraced(span)) return span;
  run.traced = false;
  return undefined;
}

// The span name of the workflow that ran last: an engine's runs share it, not a new string each.
let lastWorkflowId: string | undefined;
let lastRunSpanName = '';
function runSpanName(workflowId: string): string {
  if (workflowId !== lastWorkflowId) {
    lastWorkflowId = workflowId;
    lastRunSpanName = `workflow_run ${workflowId}`;
  }
  return lastRunSpanName;
}

/** Executes a run inside its span (from `startRunSpan`), which ends when the run has. */
export async function traceWorkflowRun(
  span: Span,
  run: Run,
  parent: Context,
  execute: () => Promise<unknown>,
): Promise<void> {
  try {
    await runInSpan(span, execute, parent);
    const status = outcomeOf(run.root.state) ?? 'failure';
    span.setAttribute(SpanAttributes.workflowStatus, status);
    if (status === 'failure') markSpanFailed(span, run.root.error?.code ?? run.root.state);
  } catch (error) {
    markSpanFailed(span, errorCodeOf(error));
    throw error;
  } finally {
    span.end();
  }
}

/** One stage as the `workflow_node {node}` span; the node's tool calls and agent runs are its children. */
export async function traceNode(
  task: WorkflowTask,
  node: DagNode,
  execute: () => Promise<void> | undefined,
): Promise<void> {
  const span = startSpan(`workflow_node ${node.id}`, {
    attributes: {
      [SpanAttributes.workflowNodeId]: node.id,
      [SpanAttributes.workflowNodeRole]: node.role,
      [SpanAttributes.workflowTaskId]: task.taskId,
    },
  });
  if (!isTraced(span)) return execute();
  const recorded = task.history.length;
  try {
    await runInSpan(span, execute);
    // The stage this node just recorded (none when the run was cancelled before it started).
    const stage = task.history.length > recorded ? task.history[task.history.length - 1] : undefined;
    if (stage) {
      span.setAttribute(SpanAttributes.workflowStatus, stage.nodeStatus);
      if (stage.error) markSpanFailed(span, stage.error.code);
    }
  } catch (error) {
    markSpanFailed(span, errorCodeOf(error));
    throw error;
  } finally {
    span.end();
  }
}

/** A tool call of a node as an `execute_tool {tool}` span (a throw marks it failed). */
export async function traceWorkflowTool<T>(toolId: string, invoke: () => T | Promise<T>): Promise<T> {
  const span = startSpan(`execute_tool ${toolId}`, {
    attributes: {
      [SpanAttributes.operationName]: 'execute_tool',
      [SpanAttributes.toolName]: toolId,
      [SpanAttributes.toolType]: 'function',
    },
  });
  if (!isTraced(span)) return invoke();
  try {
    return await runInSpan(span, invoke);
  } catch (error) {
    markSpanFailed(span, errorCodeOf(error));
    throw error;
  } finally {
    span.end();
  }
}
