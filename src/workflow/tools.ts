import { mkdir, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { z } from 'zod';
import { pathOutsideWorkspaceCode, resolveWorkspacePath, type WorkspacePath } from '../tools/index.js';
import {
  asFileNotWritten,
  ErrorCodes,
  formatZodIssues,
  openRegularFile,
  UserInputError,
  writeFileAtomically,
} from '../util/index.js';
import type { ContextItem } from './context.js';
import { WorkflowErrorCodes } from './error-codes.js';
import type { ToolManifestEntry } from './manifest-schemas.js';
import type { MemoryStoreKind } from './memory-store.js';

/**
 * File access confined to a tool's `permissions.root` by real path: `..`, absolute paths elsewhere and
 * symbolic links that lead outside the root are all refused (the platform's workspace confinement).
 */
export interface ScopedFiles {
  /** The root as configured (lexical); it need not exist until something is written. */
  readonly root: string;
  read(path: string): Promise<string>;
  write(path: string, content: string): Promise<{ path: string; bytes: number }>;
  exists(path: string): Promise<boolean>;
  /** The real absolute path, after checking it stays inside the root. */
  resolve(path: string): Promise<string>;
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
    super({ code: WorkflowErrorCodes.toolMisuse, message, ...(details ? { details } : {}) });
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

/**
 * Confines file access to `root`, which itself must lie inside `workDir` by real path (a tool root that is
 * a symbolic link out of the workflow's directory is refused like any other escape). An escape is misuse
 * of the tool: it fails the node, with the platform's `PATH_OUTSIDE_WORKSPACE` reason in its details.
 */
export function createScopedFiles(workDir: string, root: string = workDir): ScopedFiles {
  // `join`, not `resolve`: a root spelled absolute still lies below the work dir, as tools.yaml promises.
  const base = join(workDir, root);
  /** Undefined when the root does not exist yet and `create` is false: nothing can be inside it then. */
  async function confine(path: string, create: true): Promise<WorkspacePath>;
  async function confine(path: string, create: false): Promise<WorkspacePath | undefined>;
  async function confine(path: string, create: boolean): Promise<WorkspacePath | undefined> {
    try {
      const rootPath = await resolveWorkspacePath(workDir, base);
      if (!rootPath.exists) {
        if (!create) {
          // Nothing exists below a missing root, so no link can lead out: the spelling decides.
          const rel = relative(base, resolve(base, path));
          if (rel.startsWith('..') || isAbsolute(rel) || path.includes('\0'))
            throw new UserInputError({
              code: pathOutsideWorkspaceCode,
              message: 'it leads outside the root',
            });
          return undefined;
        }
        await mkdir(rootPath.absolutePath, { recursive: true });
      }
      return await resolveWorkspacePath(rootPath.absolutePath, path);
    } catch (error) {
      if (UserInputError.isInstance(error) && error.code === pathOutsideWorkspaceCode) {
        throw new ToolMisuseError(`path "${path}" is outside the tool's root ${base}: ${error.message}`, {
          path,
          reason: pathOutsideWorkspaceCode,
        });
      }
      throw error;
    }
  }
  return {
    root: base,
    resolve: async (path) => (await confine(path, true)).absolutePath,
    async read(path) {
      const target = await confine(path, false);
      // A missing root reads like a missing file (ENOENT), as it did before the root was made.
      const absolute = target ? target.absolutePath : resolve(base, path);
      // The workflow's agents write under the root: a FIFO made there must not block the read forever.
      const opened = await openRegularFile(absolute);
      if (!opened)
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: `${path} is not a regular file.`,
        });
      try {
        return await opened.handle.readFile('utf8');
      } finally {
        await opened.handle.close();
      }
    },
    async write(path, content) {
      const target = await confine(path, true);
      await mkdir(dirname(target.absolutePath), { recursive: true }).catch((error: unknown) => {
        throw asFileNotWritten(error, path);
      });
      // At the real path `confine` checked; whole or not at all (a full disk leaves the old content).
      await writeFileAtomically(target.absolutePath, content, { shown: path });
      return { path: target.relativePath, bytes: Buffer.byteLength(content) };
    },
    async exists(path) {
      const target = await confine(path, false);
      if (!target?.exists) return false;
      return stat(target.absolutePath).then(
        () => true,
        () => false,
      );
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
