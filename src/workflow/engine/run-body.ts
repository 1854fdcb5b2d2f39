import { type AgentToolSpec, runAgentNode } from '../agent-node.js';
import type { ContextItem } from '../context.js';
import type { DagNode } from '../dag.js';
import type { TaskSpec, ToolCallRecord, WorkflowTask } from '../task.js';
import {
  createScopedFiles,
  type LoadedTool,
  type ScopedFiles,
  ToolMisuseError,
  type WorkflowFunctionContext,
} from '../tools.js';
import type { EngineCore } from './core.js';
import { invokeTool } from './invoke-tool.js';
import { type MergeInput, type Run, signalOf, stageOutputs } from './run-state.js';

/** The context a function or tool receives; getters make the costly parts (outputs map, files) lazy. */
class FunctionContext implements WorkflowFunctionContext {
  private outputs: Record<string, unknown> | undefined;
  private scoped: ScopedFiles | undefined;
  private writer: WorkflowFunctionContext['memory'] | undefined;
  readonly workflowId: string;
  constructor(
    private readonly core: EngineCore,
    private readonly task: WorkflowTask,
    readonly nodeId: string,
    readonly context: ContextItem[],
    private readonly run: Run,
    private readonly root: string,
  ) {
    this.workflowId = core.workflow.id;
  }
  get signal(): AbortSignal {
    return signalOf(this.run);
  }
  get taskId(): string {
    return this.task.taskId;
  }
  get spec(): TaskSpec {
    return this.task.spec;
  }
  get stageOutputs(): Record<string, unknown> {
    this.outputs ??= stageOutputs(this.task);
    return this.outputs;
  }
  get files(): ScopedFiles {
    this.scoped ??= createScopedFiles(this.core.workDir, this.root);
    return this.scoped;
  }
  get memory(): WorkflowFunctionContext['memory'] {
    const taskId = this.task.taskId;
    const core = this.core;
    this.writer ??= {
      add: async (store, payload, memoryOptions = {}) => {
        await core.addMemory(store, payload, { ...memoryOptions, taskId });
      },
    };
    return this.writer;
  }
}

/**
 * Runs what a node does with its input and gives its output: an agent (through its model, with the node's
 * tools), a registered function, its tools in order (each output feeding the next), the default MERGE
 * (outputs of the children that count), or nothing (the input passes through). Only agents, tools and
 * functions that return a promise give a promise: the rest answer at once, so the stage goes on without two
 * more microtask turns. A function that throws gives a rejected promise, as an async body would. Every tool
 * call lands in `calls`: one that failed without misuse (status `failure`) makes the stage partial.
 */
export function runBody(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  input: unknown,
  context: ContextItem[],
  calls: ToolCallRecord[],
  merging: boolean,
): unknown {
  const manifest = node.manifest;
  if (manifest.kind === 'agent') return runToolBody(core, run, task, node, input, context, calls);
  const registered = core.functions[node.id];
  if (registered) {
    let output: unknown;
    try {
      output = registered(input, new FunctionContext(core, task, node.id, context, run, '.'));
    } catch (error) {
      return Promise.reject(error);
    }
    // A thenable that is not a promise becomes one, so the caller sees there is something to wait for.
    if (typeof (output as PromiseLike<unknown> | null)?.then === 'function') return Promise.resolve(output);
    return output;
  }
  if (manifest.tools.length > 0) return runToolBody(core, run, task, node, input, context, calls);
  if (merging) {
    // Default MERGE body: the outputs of the children that count under the failure mode, in child order.
    const inputs = (input as { merge_inputs: MergeInput[] }).merge_inputs;
    return inputs.filter((entry) => entry.status !== 'failure').map((entry) => entry.output);
  }
  // Nothing to do (a START without a function, say): the input passes through.
  return input;
}

/** An agent with the node's tools, or the node's tools in order (each output feeding the next). */
async function runToolBody(
  core: EngineCore,
  run: Run,
  task: WorkflowTask,
  node: DagNode,
  input: unknown,
  context: ContextItem[],
  calls: ToolCallRecord[],
): Promise<unknown> {
  const manifest = node.manifest;
  const makeContext = (tool?: LoadedTool): WorkflowFunctionContext =>
    new FunctionContext(core, task, node.id, context, run, tool?.manifest.permissions.root ?? '.');
  if (manifest.kind === 'agent') {
    const agent = core.agents.get(manifest.agent_id!)!;
    const agentTools: AgentToolSpec[] = manifest.tools.map((toolId) => {
      const tool = core.tools.get(toolId)!;
      return {
        name: toolId,
        description: tool.manifest.description ?? toolId,
        inputSchema: tool.manifest.input_schema ?? { type: 'object' },
        execute: async (args) => {
          const result = await invokeTool(core, run, task, node, toolId, args, calls, makeContext);
          if (!result.ok) throw new ToolMisuseError(result.error.message);
          return result.value;
        },
      };
    });
    const output = await runAgentNode({
      workflowId: core.workflow.id,
      node: manifest,
      agent,
      model: core.adapters.modelFor(agent.id),
      input,
      context,
      outputSchema: manifest.outputs_schema_id
        ? core.workflow.schemas.get(manifest.outputs_schema_id)
        : undefined,
      labels:
        node.role === 'decision' ? node.outEdges.map((edge) => (edge.label ?? edge.condition)!) : undefined,
      tools: agentTools,
      runAgentWithTools: core.runAgentWithTools,
      signal: signalOf(run),
      retry: core.modelRetry,
    });
    const misuse = calls.find((call) => call.misuse);
    if (misuse) throw new ToolMisuseError(`agent node "${node.id}" misused a tool: ${misuse.error!.message}`);
    return output;
  }
  let value = input;
  for (const toolId of manifest.tools) {
    const result = await invokeTool(core, run, task, node, toolId, value, calls, makeContext);
    if (result.ok) value = result.value;
    else if (result.misuse) throw new ToolMisuseError(result.error.message, { toolId });
    // Else the failed call is in `calls`, which makes the stage partial; the chain goes on with `value`.
  }
  return value;
}
