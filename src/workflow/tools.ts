import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, relative, resolve } from 'node:path';
import { z } from 'zod';
import { ErrorCodes, UserInputError } from '../util/errors.js';
import { formatZodIssues } from '../util/safe-json.js';
import type { ContextItem } from './context.js';
import type { ToolManifestEntry } from './manifest-schemas.js';
import type { MemoryStoreKind } from './memory-store.js';

/** File access confined to a tool's `permissions.root`. */
export interface ScopedFiles {
  readonly root: string;
  read(path: string): Promise<string>;
  write(path: string, content: string): Promise<{ path: string; bytes: number }>;
  exists(path: string): Promise<boolean>;
  /** The absolute path, after checking it stays inside the root. */
  resolve(path: string): string;
}

export interface MemoryWriter {
  add(
    store: MemoryStoreKind,
    payload: unknown,
    options?: { tags?: string[]; protected?: boolean; metadata?: Record<string, unknown> },
  ): Promise<void>;
}

/** What a deterministic function or tool receives next to its input. Everything here is read-only to it. */
export interface WorkflowFunctionContext {
  workflowId: string;
  taskId: string;
  nodeId: string;
  /** The task's request and input as given to `run`. */
  spec: Readonly<{
    request: string;
    input: unknown;
    mode: string;
    files: readonly string[];
    metadata: Readonly<Record<string, unknown>>;
  }>;
  /** Outputs of the nodes this task has executed so far, by node id. */
  stageOutputs: Readonly<Record<string, unknown>>;
  context: readonly ContextItem[];
  memory: MemoryWriter;
  files: ScopedFiles;
  signal: AbortSignal;
}

export type WorkflowFunction = (input: unknown, context: WorkflowFunctionContext) => unknown;

/**
 * Thrown (by the engine or by a tool) when a tool is used wrongly: unknown, not listed on the node, denied
 * by policy, or called with input that does not match its `input_schema`. Misuse fails the node; any other
 * tool error is only recorded.
 */
export class ToolMisuseError extends UserInputError {
  constructor(message: string, details?: Record<string, unknown>) {
    super({ code: 'TOOL_MISUSE', message, ...(details ? { details } : {}) });
  }
}

export interface LoadedTool {
  id: string;
  manifest: ToolManifestEntry;
  /** `undefined` for `function:` entrypoints until the engine binds the registered function. */
  invoke: WorkflowFunction | undefined;
  entrypoint: { kind: 'builtin' | 'function' | 'module'; name: string; module?: string };
  /** Returns a message when `input` does not match `input_schema`. */
  checkInput(input: unknown): string | undefined;
}

export function createScopedFiles(root: string): ScopedFiles {
  const base = resolve(root);
  const within = (path: string) => {
    const absolute = isAbsolute(path) ? resolve(path) : resolve(base, path);
    const rel = relative(base, absolute);
    if (rel.startsWith('..') || isAbsolute(rel)) {
      throw new ToolMisuseError(`path "${path}" is outside the tool's root ${base}`, { path });
    }
    return absolute;
  };
  return {
    root: base,
    resolve: within,
    read: (path) => readFile(within(path), 'utf8'),
    async write(path, content) {
      const absolute = within(path);
      await mkdir(dirname(absolute), { recursive: true });
      await writeFile(absolute, content, 'utf8');
      return { path: relative(base, absolute), bytes: Buffer.byteLength(content) };
    },
    async exists(path) {
      try {
        await stat(within(path));
        return true;
      } catch (error) {
        if (error instanceof ToolMisuseError) throw error;
        return false;
      }
    },
  };
}

const readInput = z.strictObject({ path: z.string().min(1) });
const writeInput = z.strictObject({ path: z.string().min(1), content: z.string() });

function parseBuiltinInput<T>(schema: z.ZodType<T>, input: unknown, tool: string): T {
  const result = schema.safeParse(input);
  if (!result.success) throw new ToolMisuseError(`${tool}: ${formatZodIssues(result.error.issues)}`);
  return result.data;
}

/** Tools every workflow can name with `entrypoint: builtin:<name>`. */
export const builtinFunctions: Readonly<Record<string, WorkflowFunction>> = {
  identity: (input) => input,
  read_file: async (input, context) => {
    const { path } = parseBuiltinInput(readInput, input, 'read_file');
    if (!(await context.files.exists(path))) return { path, exists: false, content: '' };
    return { path, exists: true, content: await context.files.read(path) };
  },
  write_file: async (input, context) => {
    const { path, content } = parseBuiltinInput(writeInput, input, 'write_file');
    return context.files.write(path, content);
  },
};

/** Builds the input check of a tool from its JSON Schema (`input_schema`), compiled once. */
export function compileInputCheck(
  schema: Record<string, unknown> | undefined,
): (input: unknown) => string | undefined {
  if (!schema) return () => undefined;
  const compiled = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]);
  return (input) => {
    const result = compiled.safeParse(input);
    return result.success ? undefined : formatZodIssues(result.error.issues);
  };
}

export function unknownFunctionError(name: string): UserInputError {
  return new UserInputError({
    code: ErrorCodes.invalidConfig,
    message: `tools.yaml names the function "${name}", which is not registered with the engine (pass it in createWorkflowEngine({ functions }))`,
  });
}
