import { existsSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { ErrorCodes, formatZodIssues, UserInputError } from '../util/index.js';
import { type ToolDefinition, toolNamePattern } from './tool.js';

export interface LoadToolModulesOptions {
  /** Module paths as written in `tools.modules`: relative paths resolve against `baseDir`. */
  modules: readonly string[];
  /** The directory of agentd.yaml (the working directory when there is no file). */
  baseDir: string;
  /** Names already taken (tools passed in code); a module tool may not reuse one. */
  reservedNames?: Iterable<string>;
}

/** A tool from a module, with the module as written in the config (for error messages). */
export interface ModuleTool {
  module: string;
  tool: ToolDefinition;
}

// A module may bundle its own copy of zod, so the check is structural rather than `instanceof`: zod 4
// schemas carry `_zod` and `safeParse`, which is all the registry and the engage loop use.
const zodSchema = z.custom<z.ZodType>(
  (value) =>
    typeof value === 'object' &&
    value !== null &&
    '_zod' in value &&
    typeof (value as { safeParse?: unknown }).safeParse === 'function',
  'expected a zod 4 schema (build the tool with defineTool)',
);
const fn = z.custom<(...args: unknown[]) => unknown>(
  (value) => typeof value === 'function',
  'expected a function',
);
const toolShape = z.object({
  name: z.string().regex(toolNamePattern, `a tool name must match ${toolNamePattern.source}`),
  description: z.string().min(1),
  input: zodSchema,
  execute: fn,
  policyResource: fn.optional(),
});
const moduleToolsSchema = z.union([toolShape, z.array(toolShape).min(1)]);

function moduleError(code: string, module: string, message: string, cause?: unknown): UserInputError {
  return new UserInputError({
    code,
    message: `tools.modules ${module}: ${message}`,
    details: { module },
    ...(cause === undefined ? {} : { cause }),
  });
}

/**
 * Imports the custom tool modules named in `tools.modules`. A module exports `tools` (an array of tools) or a
 * default export (one tool or an array); each tool is what `defineTool` returns. Every problem is a
 * UserInputError naming the module: TOOL_MODULE_NOT_FOUND (no such file), TOOL_MODULE_IMPORT_FAILED (the
 * import threw), TOOL_MODULE_INVALID (wrong exports, or a tool name used twice).
 */
export async function loadToolModules(options: LoadToolModulesOptions): Promise<ModuleTool[]> {
  const taken = new Map<string, string>();
  for (const name of options.reservedNames ?? []) taken.set(name, 'a built-in or programmatic tool');
  const loaded: ModuleTool[] = [];
  for (const module of options.modules) {
    if (!isAbsolute(module) && !module.startsWith('./') && !module.startsWith('../')) {
      throw moduleError(
        ErrorCodes.toolModuleNotFound,
        module,
        'give a file path (./my-tools.js, relative to agentd.yaml, or absolute); package names are not resolved.',
      );
    }
    const path = resolve(options.baseDir, module);
    if (!existsSync(path)) throw moduleError(ErrorCodes.toolModuleNotFound, module, `no file at ${path}.`);
    let namespace: Record<string, unknown>;
    try {
      namespace = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
    } catch (error) {
      throw moduleError(
        ErrorCodes.toolModuleImportFailed,
        module,
        `importing it failed: ${(error as Error).message}`,
        error,
      );
    }
    const exported = 'tools' in namespace ? namespace.tools : namespace.default;
    if (exported === undefined) {
      throw moduleError(
        ErrorCodes.toolModuleInvalid,
        module,
        'expected an export named `tools` (an array of tools) or a default export (a tool or an array).',
      );
    }
    const parsed = moduleToolsSchema.safeParse(exported);
    if (!parsed.success)
      throw moduleError(ErrorCodes.toolModuleInvalid, module, formatZodIssues(parsed.error.issues));
    // The validated values are the module's own objects: zod's parse would copy them and drop extra fields.
    const tools = (Array.isArray(exported) ? exported : [exported]) as ToolDefinition[];
    for (const tool of tools) {
      const owner = taken.get(tool.name);
      if (owner) {
        throw moduleError(
          ErrorCodes.toolModuleInvalid,
          module,
          `the tool name "${tool.name}" is already used by ${owner}; tool names must be unique.`,
        );
      }
      taken.set(tool.name, module);
      loaded.push({ module, tool });
    }
  }
  return loaded;
}

/** The error for a module tool whose name a built-in tool already has (checked once the built-ins exist). */
export function toolModuleNameTaken(entry: ModuleTool): UserInputError {
  return moduleError(
    ErrorCodes.toolModuleInvalid,
    entry.module,
    `the tool name "${entry.tool.name}" is already used by a built-in tool; tool names must be unique.`,
  );
}
