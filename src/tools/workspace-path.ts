import { lstat, realpath } from 'node:fs/promises';
import path from 'node:path';
import { UserInputError } from '../util/index.js';

export const pathOutsideWorkspaceCode = 'PATH_OUTSIDE_WORKSPACE';
export const pathProtectedCode = 'PATH_PROTECTED';

export interface WorkspacePath {
  /** Absolute path with every existing component resolved through symlinks. */
  absolutePath: string;
  /** Relative to the workspace root, `/`-separated; `.` for the root itself. */
  relativePath: string;
  /** Real path of the workspace root. */
  root: string;
  exists: boolean;
}

function isInside(root: string, candidate: string): boolean {
  const relative = path.relative(root, candidate);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

function outside(requested: string, why: string): UserInputError {
  return new UserInputError({
    code: pathOutsideWorkspaceCode,
    message: `Path "${requested}" is not allowed: ${why}. Use a path relative to the workspace root.`,
    details: { path: requested },
  });
}

/**
 * Confines `requested` to the workspace. Rejects `..` escapes, absolute paths elsewhere, and symlinks —
 * anywhere in the path, dangling ones included — that lead outside. Non-existent paths (for writes) are
 * checked through their nearest existing ancestor, so a file can never be created through an escaping link.
 * A link replaced between this check and the use is not covered (the workspace belongs to the agent).
 */
export async function resolveWorkspacePath(workspaceDir: string, requested: string): Promise<WorkspacePath> {
  if (requested.includes('\0')) throw outside(requested, 'it contains a NUL byte');
  const root = await realpath(workspaceDir);
  const lexicalRoot = path.resolve(workspaceDir);
  let candidate: string;
  if (path.isAbsolute(requested)) {
    const normalized = path.resolve(requested);
    // Accept absolute paths spelled through the configured (possibly symlinked) workspace path too.
    if (isInside(root, normalized)) candidate = normalized;
    else if (isInside(lexicalRoot, normalized))
      candidate = path.join(root, path.relative(lexicalRoot, normalized));
    else throw outside(requested, 'it is outside the workspace');
  } else {
    candidate = path.resolve(root, requested);
    if (!isInside(root, candidate)) throw outside(requested, 'it leads outside the workspace');
  }

  // Walk up to the nearest component that exists and resolve it through any symlinks.
  const missing: string[] = [];
  let probe = candidate;
  for (;;) {
    try {
      const real = await realpath(probe);
      if (!isInside(root, real))
        throw outside(requested, 'a symbolic link in it points outside the workspace');
      const absolutePath = path.join(real, ...missing.reverse());
      return {
        absolutePath,
        relativePath: path.relative(root, absolutePath).split(path.sep).join('/') || '.',
        root,
        exists: missing.length === 0,
      };
    } catch (error) {
      if (UserInputError.isInstance(error)) throw error;
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error;
      // realpath fails on a dangling link too; writing through it would create its (outside) target.
      const isLink = await lstat(probe).then(
        (info) => info.isSymbolicLink(),
        () => false,
      );
      if (isLink) throw outside(requested, 'it goes through a dangling symbolic link');
      missing.push(path.basename(probe));
      probe = path.dirname(probe);
    }
  }
}

/**
 * The workspace-relative, normalised spelling of a path for policy patterns (`./a/../secrets/x` and
 * `<workspace>/secrets/x` both become `secrets/x`). Lexical only: symlinks are handled by
 * `resolveWorkspacePath` when the tool runs. Paths outside the workspace keep their absolute form.
 */
export function policyPathOf(workspaceDir: string, requested: string): string {
  const absolute = path.resolve(workspaceDir, requested);
  const relative = path.relative(path.resolve(workspaceDir), absolute);
  if (relative === '') return '.';
  if (relative.startsWith('..') || path.isAbsolute(relative)) return absolute;
  return relative.split(path.sep).join('/');
}

/**
 * Refuses a write whose resolved target is, or lies below, one of `protectedPaths` (hook directories,
 * agentd's token, database and config). The workspace normally holds none of them; this keeps it so when
 * an operator points one into the workspace or links the workspace elsewhere.
 */
export async function assertWritable(
  target: WorkspacePath,
  requested: string,
  protectedPaths: ReadonlyArray<string>,
): Promise<void> {
  for (const protectedPath of protectedPaths) {
    const real = await realpath(protectedPath).catch(() => path.resolve(protectedPath));
    if (isInside(real, target.absolutePath) || isInside(path.resolve(protectedPath), target.absolutePath)) {
      throw new UserInputError({
        code: pathProtectedCode,
        message: `Path "${requested}" is not writable by tools: it is part of agentd's own configuration (hooks, token, database or config).`,
        details: { path: requested },
      });
    }
  }
}
