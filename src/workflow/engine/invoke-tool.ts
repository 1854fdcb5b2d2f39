import { AgentdError } from '../../util/index.js';
import { errorShape } from '../agent-node.js';
import type { DagNode } from '../dag.js';
import { WorkflowErrorCodes } from '../error-codes.js';
import type { ToolCallRecord, WorkflowTask } from '../task.js';
import { type LoadedTool, ToolMisuseError, type WorkflowFunctionContext } from '../tools.js';
import { type EngineCore, policyDenial } from './core.js';
import type { Run } from './run-state.js';
import { traceWorkflowTool } from './tracing.js';

export type ToolOutcome =
  | { ok: true; value: unknown }
  | { ok: false; misuse: boolean; error: { code: string; message: string } };

/**
 * One tool call of a node: checks that the node lists the tool, that policy allows it and that the input
 * matches its schema (each a misuse), then runs it. Every call is recorded in `calls`, reported, and — when
 * it succeeds — kept as a `tool_result` artifact. Never throws: the outcome says what happened.
 */
export async function invokeTool(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  toolId: string,
  input: unknown,
  calls: ToolCallRecord[],
  makeContext: (tool: LoadedTool) => WorkflowFunctionContext,
): Promise<ToolOutcome> {
  const { clock, emitter } = core;
  const startedAt = clock.now();
  const fail = (misuse: boolean, error: { code: string; message: string }): ToolOutcome => {
    const clean = core.redact ? { code: error.code, message: core.redactText(error.message) } : error;
    calls.push({
      toolId,
      input,
      status: 'failure',
      error: clean,
      misuse,
      startedAt,
      completedAt: clock.now(),
    });
    emitter.emit(run, 'tool_failed', task.taskId, node.id, { toolId, misuse, error: clean });
    return { ok: false, misuse, error: clean };
  };
  const tool = core.tools.get(toolId);
  if (!tool || !node.manifest.tools.includes(toolId)) {
    return fail(true, {
      code: WorkflowErrorCodes.toolMisuse,
      message: `tool "${toolId}" is not listed on node "${node.id}"`,
    });
  }
  const denial = policyDenial(core, 'tool', toolId);
  if (denial) {
    emitter.emit(run, 'policy_denied', task.taskId, node.id, {
      target: 'tool',
      targetId: toolId,
      policy: denial.policy,
      reason: denial.reason,
    });
    return fail(true, {
      code: WorkflowErrorCodes.policyDenied,
      message: `tool "${toolId}" is denied by policy "${denial.policy}"`,
    });
  }
  const problem = tool.checkInput(input);
  if (problem)
    return fail(true, {
      code: WorkflowErrorCodes.toolMisuse,
      message: `tool "${toolId}" input does not match its input_schema: ${problem}`,
    });
  emitter.emit(run, 'tool_invoked', task.taskId, node.id, { toolId });
  try {
    const value = await traceWorkflowTool(toolId, () => tool.invoke!(input, makeContext(tool)));
    const completedAt = clock.now();
    calls.push({ toolId, input, output: value, status: 'success', misuse: false, startedAt, completedAt });
    core.metrics.recordDuration('tool.duration_ms', `tool=${toolId}`, completedAt - startedAt);
    emitter.emit(run, 'tool_completed', task.taskId, node.id, {
      toolId,
      durationMs: completedAt - startedAt,
    });
    core.artifacts.add({
      artifactId: `${task.taskId}:${task.history.length}:tool:${calls.length - 1}`,
      rootTaskId: run.root.taskId,
      taskId: task.taskId,
      nodeId: node.id,
      type: 'tool_result',
      createdAt: completedAt,
      payload: core.redact ? core.redact(value) : value,
      metadata: { toolId },
    });
    return { ok: true, value };
  } catch (error) {
    const misuse =
      error instanceof ToolMisuseError ||
      (AgentdError.isInstance(error) && error.code === WorkflowErrorCodes.toolMisuse);
    return fail(misuse, errorShape(error));
  }
}
