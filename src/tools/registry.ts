import { z } from 'zod';
import type { ModelToolDefinition } from '../model/index.js';
import { deepFreeze, ErrorCodes, UserInputError } from '../util/index.js';
import type { ToolDefinition } from './tool.js';

/** The tools a runtime offers its agents (`runtime.tools`), by name. */
export interface ToolRegistry {
  /** Throws CONFLICT when a tool of that name is already registered. */
  register(tool: ToolDefinition): void;
  /** Removes a tool (an MCP server went away or changed its list); false when none had that name. */
  unregister(name: string): boolean;
  get(name: string): ToolDefinition | undefined;
  has(name: string): boolean;
  list(): ToolDefinition[];
  /**
   * Definitions for the model, in registration order; only `names` when given (unknown names are skipped).
   * Without `names`, the same frozen array until the registry changes.
   */
  toModelTools(names?: Iterable<string>): readonly ModelToolDefinition[];
  /** Every registered name; the same set until the registry changes (read-only: do not change it). */
  names(): ReadonlySet<string>;
}

export interface ToolRegistryOptions {
  /**
   * Applied to every result (and error message) of every tool registered here, before anything else sees
   * it: the model, hooks, memory, the ledger, events, transcripts. The runtime passes its secret redactor,
   * so a key a tool read never enters the system.
   */
  redactText?: (text: string) => string;
}

/** Wraps a tool so its results and error messages pass through `redact`. */
function redactingTool(tool: ToolDefinition, redact: (text: string) => string): ToolDefinition {
  return {
    ...tool,
    async execute(args, context) {
      let result: Awaited<ReturnType<ToolDefinition['execute']>>;
      try {
        result = await tool.execute(args, context);
      } catch (error) {
        if (error instanceof Error) error.message = redact(error.message);
        throw error;
      }
      if (typeof result === 'string') return redact(result);
      const entry = result.metadata?.ledgerEntry;
      return {
        ...result,
        content: redact(result.content),
        ...(result.metadata && entry
          ? { metadata: { ...result.metadata, ledgerEntry: { ...entry, content: redact(entry.content) } } }
          : {}),
      };
    },
  };
}

export function createToolRegistry(
  tools: Iterable<ToolDefinition> = [],
  options: ToolRegistryOptions = {},
): ToolRegistry {
  const byName = new Map<string, ToolDefinition>();
  // JSON Schema conversion walks the whole zod tree; tools are immutable so it is done once per tool.
  const modelDefinitions = new Map<string, ModelToolDefinition>();

  const toModelTool = (tool: ToolDefinition): ModelToolDefinition => {
    let definition = modelDefinitions.get(tool.name);
    if (!definition) {
      const { $schema: _ignored, ...inputSchema } =
        tool.inputJsonSchema ??
        z.toJSONSchema(tool.input, {
          io: 'input',
          unrepresentable: 'any',
        });
      // Frozen to the last level, a copy of its own: providers keep the JSON text of frozen definitions.
      definition = deepFreeze({
        name: tool.name,
        description: tool.description,
        inputSchema: structuredClone(inputSchema),
      });
      modelDefinitions.set(tool.name, definition);
    }
    return definition;
  };

  // A run offering every tool (the chat turn's) reads these on every turn: made once per change, not per run.
  let allModelTools: readonly ModelToolDefinition[] | undefined;
  let allNames: ReadonlySet<string> | undefined;
  const changed = () => {
    allModelTools = undefined;
    allNames = undefined;
  };

  const registry: ToolRegistry = {
    register(tool) {
      if (byName.has(tool.name)) {
        throw new UserInputError({
          code: ErrorCodes.conflict,
          message: `A tool named "${tool.name}" is already registered; tool names must be unique.`,
        });
      }
      byName.set(tool.name, options.redactText ? redactingTool(tool, options.redactText) : tool);
      changed();
    },
    unregister(name) {
      modelDefinitions.delete(name);
      changed();
      return byName.delete(name);
    },
    get: (name) => byName.get(name),
    has: (name) => byName.has(name),
    list: () => [...byName.values()],
    toModelTools(names) {
      if (names === undefined) {
        allModelTools ??= Object.freeze([...byName.values()].map(toModelTool));
        return allModelTools;
      }
      const wanted = new Set(names);
      return [...byName.values()].filter((tool) => wanted.has(tool.name)).map(toModelTool);
    },
    names() {
      allNames ??= new Set(byName.keys());
      return allNames;
    },
  };
  for (const tool of tools) registry.register(tool);
  return registry;
}
