import {
  completeModel,
  type LanguageModel,
  type ModelMessage,
  type ModelRequest,
  type ModelRetryOptions,
} from '../model/index.js';
import { AgentdError, ProviderError, UserInputError } from '../util/index.js';
import type { ContextItem } from './context.js';
import { WorkflowErrorCodes } from './error-codes.js';
import type { AgentDefinition, WorkflowNodeManifest } from './manifest-schemas.js';

/** A workflow tool as offered to an engage loop: invoking it goes through the engine's policy and telemetry. */
export interface AgentToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the arguments (the tool's `input_schema`, or any object). */
  inputSchema: Record<string, unknown>;
  execute(args: Record<string, unknown>, options: { signal: AbortSignal }): Promise<unknown>;
}

export interface RunAgentWithToolsOptions {
  model: LanguageModel;
  messages: ModelMessage[];
  tools: AgentToolSpec[];
  maxTurns: number | undefined;
  maxTokens: number | undefined;
  temperature: number | undefined;
  responseFormat: ModelRequest['responseFormat'];
  metadata: Record<string, unknown>;
  signal: AbortSignal;
}

/** The final assistant text of the loop, or the error that ended it. */
export interface RunAgentWithToolsResult {
  text: string;
  error?: { code: string; message: string };
}

/**
 * Runs an agent node whose manifest lists tools. The agentd runtime passes one built on `runEngage`
 * (src/engage); the workflow engine does not carry a second tool loop of its own.
 */
export type RunAgentWithTools = (options: RunAgentWithToolsOptions) => Promise<RunAgentWithToolsResult>;

export interface AgentCallOptions {
  workflowId: string;
  node: WorkflowNodeManifest;
  agent: AgentDefinition;
  model: LanguageModel;
  input: unknown;
  context: ReadonlyArray<ContextItem>;
  outputSchema: Record<string, unknown> | undefined;
  /** For DECISION nodes: the labels of the outbound edges. */
  labels: string[] | undefined;
  tools: AgentToolSpec[];
  runAgentWithTools: RunAgentWithTools | undefined;
  signal: AbortSignal;
  retry: ModelRetryOptions | undefined;
}

function inputText(input: unknown): string {
  if (typeof input === 'string') return input;
  return JSON.stringify(input ?? null, null, 2);
}

/** The request text the DECISION is about: the input's `request`/`instruction` field when there is one. */
function routingText(input: unknown): string {
  if (typeof input === 'string') return input;
  if (typeof input === 'object' && input !== null) {
    for (const key of ['request', 'instruction', 'text', 'query']) {
      const value = (input as Record<string, unknown>)[key];
      if (typeof value === 'string') return value;
    }
  }
  return inputText(input);
}

export function buildAgentMessages(
  options: Pick<AgentCallOptions, 'workflowId' | 'node' | 'agent' | 'input' | 'context' | 'labels'>,
): ModelMessage[] {
  const { node, agent } = options;
  const parts = [
    agent.instructions ?? `You are the agent "${agent.id}" in the workflow "${options.workflowId}".`,
    `You are executing the node "${node.name ?? node.id}"${node.description ? `: ${node.description}` : '.'}`,
  ];
  if (options.labels) {
    parts.push(
      `Choose exactly one of these routes: ${options.labels.join(', ')}. Reply with JSON {"selected_edge": "<route>"}.`,
    );
  }
  if (options.context.length > 0) {
    parts.push(`Context (oldest first):\n${options.context.map((item) => `- ${item.text}`).join('\n')}`);
  }
  return [
    { role: 'system', content: parts.join('\n\n') },
    { role: 'user', content: inputText(options.input) },
  ];
}

/** Models sometimes wrap JSON in a Markdown fence; accept that, nothing looser. */
export function parseJsonReply(text: string): unknown {
  const trimmed = text.trim();
  const fenced = /^```(?:json)?\s*\n([\s\S]*?)\n```$/.exec(trimmed);
  return JSON.parse(fenced ? fenced[1]! : trimmed);
}

/**
 * Calls the node's model once (or the injected engage loop when the node lists tools) and turns the reply
 * into the node output: parsed JSON when an output schema (or a DECISION) asks for it, else the text.
 * Throws AgentdErrors; the engine records them as the stage's error.
 */
export async function runAgentNode(options: AgentCallOptions): Promise<unknown> {
  const { node, agent, labels } = options;
  const messages = buildAgentMessages(options);
  const schema =
    options.outputSchema ??
    (labels
      ? {
          type: 'object',
          properties: { selected_edge: { type: 'string', enum: labels } },
          required: ['selected_edge'],
        }
      : undefined);
  const responseFormat: ModelRequest['responseFormat'] = schema
    ? { type: 'json', schema, name: node.outputs_schema_id ?? 'route' }
    : undefined;
  const metadata: Record<string, unknown> = labels
    ? {
        purpose: 'route',
        labels,
        input: routingText(options.input),
        workflow: options.workflowId,
        nodeId: node.id,
      }
    : { purpose: 'workflow-node', workflow: options.workflowId, nodeId: node.id, role: node.role };

  let text: string;
  if (node.tools.length > 0) {
    if (!options.runAgentWithTools) {
      throw new UserInputError({
        code: WorkflowErrorCodes.agentToolsUnavailable,
        message: `agent node "${node.id}" lists tools but the engine has no runAgentWithTools`,
      });
    }
    const result = await options.runAgentWithTools({
      model: options.model,
      messages,
      tools: options.tools,
      maxTurns: agent.config.max_turns,
      maxTokens: agent.config.max_tokens,
      temperature: agent.config.temperature,
      responseFormat,
      metadata,
      signal: options.signal,
    });
    if (result.error) throw new ProviderError({ code: result.error.code, message: result.error.message });
    text = result.text;
  } else {
    const response = await completeModel(
      options.model,
      {
        messages,
        ...(agent.config.max_tokens !== undefined ? { maxTokens: agent.config.max_tokens } : {}),
        ...(agent.config.temperature !== undefined ? { temperature: agent.config.temperature } : {}),
        ...(responseFormat ? { responseFormat } : {}),
        metadata,
      },
      {
        signal: options.signal,
        ...(agent.config.timeout_ms !== undefined ? { timeoutMs: agent.config.timeout_ms } : {}),
        ...(options.retry ? { retry: options.retry } : {}),
      },
    );
    if (response.error) {
      throw new ProviderError({
        code: response.error.code,
        message: response.error.message,
        retryable: response.error.retryable,
        ...(response.error.statusCode !== undefined ? { statusCode: response.error.statusCode } : {}),
      });
    }
    text = response.text;
  }

  if (!schema) return text;
  try {
    return parseJsonReply(text);
  } catch {
    // A DECISION reply may be the bare label; the router matches it against the edges.
    if (labels) return text.trim().split('\n')[0]!.trim();
    throw new ProviderError({
      code: WorkflowErrorCodes.outputInvalid,
      message: `agent node "${node.id}" was asked for JSON matching "${node.outputs_schema_id}" but replied with text that is not JSON`,
    });
  }
}

export function errorShape(error: unknown): { code: string; message: string } {
  if (AgentdError.isInstance(error)) return { code: error.code, message: error.message };
  if (error instanceof Error) return { code: WorkflowErrorCodes.nodeError, message: error.message };
  return { code: WorkflowErrorCodes.nodeError, message: String(error) };
}
