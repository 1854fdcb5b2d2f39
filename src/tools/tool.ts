import type { z } from 'zod';
import type { Bus } from '../bus/index.js';
import type { Logger } from '../util/index.js';
import type { ToolCallOutcome } from './execute.js';

/** What a tool sees of the run that called it. */
export interface ToolContext {
  runId: string;
  agentId: string;
  sessionKey?: string;
  workItemId?: string;
  /** The id the model gave this call; results are matched back by it. */
  toolCallId: string;
  /** Root every file tool is confined to. */
  workspaceDir: string;
  /** Aborted when the run is aborted; long-running tools must stop promptly. */
  signal: AbortSignal;
  bus: Bus;
  logger: Logger;
  /**
   * Runs another tool of this run through the same pipeline as a call the model makes (allow-list, hooks,
   * policy, `run:tool-*` events, ledger bookkeeping). Set by the engage loop; the sandbox calls tools
   * from code with it.
   */
  callTool?: (call: {
    id: string;
    name: string;
    arguments: Record<string, unknown>;
  }) => Promise<ToolCallOutcome>;
}

/**
 * A tool's answer. `content` goes to the model; `metadata` stays in the runtime (the engage loop reads
 * `ledgerEntry` and `activatedSkill` from it) and is never sent to the model.
 */
export interface ToolResult {
  content: string;
  isError?: boolean;
  metadata?: ToolResultMetadata;
}

/** Extra facts a tool reports with its result, for the loop rather than the model. */
export interface ToolResultMetadata {
  /** Set by tools that wrote a ledger entry: resets the nudge counter, and a `step` closes a context block. */
  ledgerEntry?: { workItemId: string; seq: number; entryType: string; content: string };
  /** Set by skill activation: the loop injects the body into the system prompt so it survives compaction. */
  activatedSkill?: { name: string; version: number; body: string };
  [key: string]: unknown;
}

/** A tool as the runtime registers it; build one with `defineTool`, which validates `Input` with zod. */
export interface ToolDefinition<Input = any> {
  /** `[A-Za-z0-9_-]{1,64}`: the intersection of what OpenAI and Anthropic accept. */
  readonly name: string;
  readonly description: string;
  /**
   * Example argument objects. `defineTool` appends each to the description as `Example: {json}`, so the
   * model sees them; a test checks every built-in tool's examples against its schema.
   */
  readonly examples?: ReadonlyArray<Record<string, unknown>>;
  /** zod schema of the arguments object; exported to the model as JSON Schema. */
  readonly input: z.ZodType<Input>;
  /**
   * JSON Schema sent to the model instead of converting `input`: for tools whose schema is defined
   * elsewhere (an MCP server's tool), where `input` only validates against that schema.
   */
  readonly inputJsonSchema?: Record<string, unknown>;
  /**
   * What the call acts on, for policy rules with a `resource` pattern: a workspace path, a URL host, a
   * command line. Undefined when the tool has no meaningful target.
   */
  readonly policyResource?: (args: Input, context: ToolContext) => string | undefined;
  /** A returned string is shorthand for `{ content }`. A throw becomes an `is_error` result. */
  execute(args: Input, context: ToolContext): Promise<ToolResult | string>;
}

/** `[A-Za-z0-9_-]{1,64}`: the tool names both OpenAI and Anthropic accept. */
export const toolNamePattern = /^[A-Za-z0-9_-]{1,64}$/;

/** Declares a tool. The name is checked here so a bad name fails at start-up, not at the first model call. */
export function defineTool<Schema extends z.ZodType>(definition: {
  name: string;
  description: string;
  /** Argument objects shown to the model after the description (see `ToolDefinition.examples`). */
  examples?: ReadonlyArray<z.input<Schema> & Record<string, unknown>>;
  input: Schema;
  policyResource?: (args: z.output<Schema>, context: ToolContext) => string | undefined;
  execute(args: z.output<Schema>, context: ToolContext): Promise<ToolResult | string>;
}): ToolDefinition<z.output<Schema>> {
  if (!toolNamePattern.test(definition.name)) {
    throw new RangeError(`tool name "${definition.name}" must match ${toolNamePattern.source}`);
  }
  const examples = definition.examples ?? [];
  const description = [
    definition.description,
    ...examples.map((example) => `Example: ${JSON.stringify(example)}`),
  ].join('\n');
  // zod's generic `Schema` does not narrow to ZodType<output<Schema>> by itself; it is that type.
  return { ...definition, description, input: definition.input as z.ZodType<z.output<Schema>> };
}
