import { lstat, mkdir, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import {
  asFileNotWritten,
  ErrorCodes,
  readRegularFile,
  UserInputError,
  writeFileAtomically,
} from '../../util/index.js';
import { defineTool, type ToolDefinition } from '../tool.js';
import { assertWritable, policyPathOf, resolveWorkspacePath } from '../workspace-path.js';
import { compileGrepPattern, runGrepJob } from './grep-search.js';

export interface FileToolsOptions {
  /** Largest file read_file / edit_file / grep will load. */
  maxFileBytes?: number;
  /** Cap on list_files entries and grep matches when the model asks for more. */
  maxEntries?: number;
  /** Hard limit on one grep call; the search runs in a worker that is terminated at this deadline. */
  grepTimeoutMs?: number;
  /** Files and directories write_file and edit_file refuse even inside the workspace (hooks, token, …). */
  protectedPaths?: ReadonlyArray<string>;
}

const skippedDirectories = new Set(['.git', 'node_modules']);

function looksBinary(buffer: Buffer): boolean {
  return buffer.subarray(0, 8000).includes(0);
}

async function readTextFile(absolutePath: string, shown: string, maxFileBytes: number): Promise<string> {
  // The model may have made the path a FIFO or a device: `readRegularFile` refuses those without blocking.
  const read = await readRegularFile(absolutePath, maxFileBytes);
  if ('refused' in read && read.refused === 'not a regular file')
    throw new UserInputError({ code: ErrorCodes.invalidRequest, message: `${shown} is not a regular file.` });
  if ('refused' in read)
    throw new UserInputError({
      code: ErrorCodes.payloadTooLarge,
      message: `${shown} is ${read.size ?? `more than ${maxFileBytes}`} bytes; the limit is ${maxFileBytes}. Use grep or read a smaller file.`,
    });
  if (looksBinary(read.bytes))
    throw new UserInputError({ code: ErrorCodes.invalidRequest, message: `${shown} is a binary file.` });
  return read.bytes.toString('utf8');
}

/** Walks a directory without following symlinks (a link is listed, never entered). */
async function* walk(
  root: string,
  directory: string,
  recursive: boolean,
): AsyncGenerator<{ relative: string; kind: 'file' | 'dir' | 'link' }> {
  const entries = await readdir(directory, { withFileTypes: true });
  entries.sort((left, right) => left.name.localeCompare(right.name));
  for (const entry of entries) {
    const absolute = path.join(directory, entry.name);
    const relative = path.relative(root, absolute).split(path.sep).join('/');
    if (entry.isSymbolicLink()) yield { relative, kind: 'link' };
    else if (entry.isDirectory()) {
      yield { relative, kind: 'dir' };
      if (recursive && !skippedDirectories.has(entry.name)) yield* walk(root, absolute, recursive);
    } else if (entry.isFile()) yield { relative, kind: 'file' };
  }
}

/** read_file, write_file, edit_file, list_files and grep, all confined to the run's workspace. */
export function createFileTools(options: FileToolsOptions = {}): ToolDefinition[] {
  const maxFileBytes = options.maxFileBytes ?? 1024 * 1024;
  const maxEntries = options.maxEntries ?? 1000;
  const grepTimeoutMs = options.grepTimeoutMs ?? 10_000;
  const protectedPaths = options.protectedPaths ?? [];

  const readFileTool = defineTool({
    name: 'read_file',
    description: 'Read a UTF-8 text file from the workspace. Optionally a range of lines (1-based).',
    examples: [{ path: 'docs/notes.md', start_line: 1, line_count: 40 }],
    input: z.object({
      path: z.string().min(1).describe('Path relative to the workspace root'),
      start_line: z.number().int().min(1).optional().describe('First line to return (1-based)'),
      line_count: z.number().int().min(1).optional().describe('How many lines to return'),
    }),
    policyResource: (args, context) => policyPathOf(context.workspaceDir, args.path),
    async execute(args, context) {
      const target = await resolveWorkspacePath(context.workspaceDir, args.path);
      const text = await readTextFile(target.absolutePath, args.path, maxFileBytes);
      if (args.start_line === undefined && args.line_count === undefined) return text;
      const lines = text.split('\n');
      const start = (args.start_line ?? 1) - 1;
      return lines
        .slice(start, args.line_count === undefined ? undefined : start + args.line_count)
        .join('\n');
    },
  });

  const writeFileTool = defineTool({
    name: 'write_file',
    description: 'Create or overwrite a text file in the workspace. Missing parent directories are created.',
    examples: [{ path: 'notes/plan.md', content: '# Plan\n- review the draft\n' }],
    input: z.object({
      path: z.string().min(1).describe('Path relative to the workspace root'),
      content: z.string(),
    }),
    policyResource: (args, context) => policyPathOf(context.workspaceDir, args.path),
    async execute(args, context) {
      const target = await resolveWorkspacePath(context.workspaceDir, args.path);
      await assertWritable(target, args.path, protectedPaths);
      if (target.relativePath === '.')
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: 'Cannot write to the workspace root.',
        });
      await mkdir(path.dirname(target.absolutePath), { recursive: true }).catch((error: unknown) => {
        throw asFileNotWritten(error, args.path);
      });
      // At the resolved real path, as the checks above decided: a link inside the workspace is written
      // through (its target gets the bytes), and a full disk or a kill leaves the old content whole.
      await writeFileAtomically(target.absolutePath, args.content, { shown: args.path });
      return `Wrote ${Buffer.byteLength(args.content, 'utf8')} bytes to ${target.relativePath}.`;
    },
  });

  const editFileTool = defineTool({
    name: 'edit_file',
    description:
      'Replace exact text in a workspace file. old_text must occur exactly once unless replace_all is true.',
    examples: [{ path: 'src/app.ts', old_text: 'const retries = 3;', new_text: 'const retries = 5;' }],
    input: z.object({
      path: z.string().min(1),
      old_text: z.string().min(1).describe('Exact text to find, including whitespace'),
      new_text: z.string(),
      replace_all: z.boolean().optional(),
    }),
    policyResource: (args, context) => policyPathOf(context.workspaceDir, args.path),
    async execute(args, context) {
      const target = await resolveWorkspacePath(context.workspaceDir, args.path);
      await assertWritable(target, args.path, protectedPaths);
      const text = await readTextFile(target.absolutePath, args.path, maxFileBytes);
      const occurrences = text.split(args.old_text).length - 1;
      if (occurrences === 0)
        return {
          content: `old_text was not found in ${target.relativePath}; nothing changed.`,
          isError: true,
        };
      if (occurrences > 1 && !args.replace_all) {
        return {
          content: `old_text occurs ${occurrences} times in ${target.relativePath}; add context to make it unique or set replace_all.`,
          isError: true,
        };
      }
      // Counted before it is built: replace_all multiplies new_text by the occurrences, so a small file and
      // a long new_text would make a string (and a file) of hundreds of megabytes. The result stays a file
      // these tools can read and edit again.
      const replaced = args.replace_all ? occurrences : 1;
      const updatedBytes =
        Buffer.byteLength(text, 'utf8') +
        replaced * (Buffer.byteLength(args.new_text, 'utf8') - Buffer.byteLength(args.old_text, 'utf8'));
      if (updatedBytes > maxFileBytes)
        throw new UserInputError({
          code: ErrorCodes.payloadTooLarge,
          message: `${args.path} would be ${updatedBytes} bytes after the edit; the limit is ${maxFileBytes}. Nothing changed.`,
        });
      // A replacer function keeps `$&`-style sequences in new_text literal.
      const updated = args.replace_all
        ? text.split(args.old_text).join(args.new_text)
        : text.replace(args.old_text, () => args.new_text);
      await writeFileAtomically(target.absolutePath, updated, { shown: args.path });
      return `Replaced ${replaced} occurrence(s) in ${target.relativePath}.`;
    },
  });

  const listFilesTool = defineTool({
    name: 'list_files',
    description:
      'List a workspace directory. Directories end with "/", symbolic links with "@". Recursive skips .git and node_modules.',
    examples: [{ path: 'src', recursive: true }],
    input: z.object({
      path: z.string().min(1).default('.'),
      recursive: z.boolean().default(false),
      max_entries: z.number().int().min(1).optional(),
    }),
    policyResource: (args, context) => policyPathOf(context.workspaceDir, args.path),
    async execute(args, context) {
      const target = await resolveWorkspacePath(context.workspaceDir, args.path);
      const info = await stat(target.absolutePath);
      if (!info.isDirectory()) return { content: `${args.path} is not a directory.`, isError: true };
      const limit = Math.min(args.max_entries ?? maxEntries, maxEntries);
      const lines: string[] = [];
      for await (const entry of walk(target.root, target.absolutePath, args.recursive)) {
        if (lines.length === limit) {
          lines.push(`[… stopped at ${limit} entries]`);
          break;
        }
        lines.push(
          entry.kind === 'dir'
            ? `${entry.relative}/`
            : entry.kind === 'link'
              ? `${entry.relative}@`
              : entry.relative,
        );
      }
      return lines.length ? lines.join('\n') : '(empty directory)';
    },
  });

  const grepTool = defineTool({
    name: 'grep',
    description:
      'Search workspace text files for an RE2 regular expression (no lookaround or backreferences) or a fixed string. Returns "path:line: text" lines.',
    examples: [{ pattern: 'createRuntime', path: 'src', ignore_case: true }],
    input: z.object({
      pattern: z.string().min(1),
      path: z.string().min(1).default('.').describe('File or directory to search'),
      fixed_string: z.boolean().default(false),
      ignore_case: z.boolean().default(false),
      max_matches: z.number().int().min(1).optional(),
    }),
    policyResource: (args, context) => policyPathOf(context.workspaceDir, args.path),
    async execute(args, context) {
      const target = await resolveWorkspacePath(context.workspaceDir, args.path);
      const matcher = await compileGrepPattern(args.pattern, {
        fixedString: args.fixed_string,
        ignoreCase: args.ignore_case,
      });
      const limit = Math.min(args.max_matches ?? 200, maxEntries);
      const info = await lstat(target.absolutePath);
      const files: Array<{ shown: string; absolute: string }> = [];
      if (info.isFile()) files.push({ shown: target.relativePath, absolute: target.absolutePath });
      else if (info.isDirectory()) {
        const prefix = target.relativePath === '.' ? '' : `${target.relativePath}/`;
        for await (const entry of walk(target.absolutePath, target.absolutePath, true)) {
          if (entry.kind === 'file')
            files.push({
              shown: `${prefix}${entry.relative}`,
              absolute: path.join(target.absolutePath, entry.relative),
            });
        }
      }
      if (files.length === 0) return 'No matches.';
      const outcome = await runGrepJob(
        { source: matcher.pattern(), ignoreCase: args.ignore_case, files, maxFileBytes, limit },
        { timeoutMs: grepTimeoutMs, signal: context.signal },
      );
      if (outcome.kind === 'aborted') return { content: 'The search was aborted.', isError: true };
      if (outcome.kind === 'timeout') {
        const found = outcome.matches.length ? `${outcome.matches.join('\n')}\n` : '';
        return {
          content: `${found}[search stopped after ${grepTimeoutMs} ms; narrow the path or simplify the pattern]`,
          isError: true,
        };
      }
      if (outcome.stoppedAtLimit) return `${outcome.matches.join('\n')}\n[… stopped at ${limit} matches]`;
      return outcome.matches.length ? outcome.matches.join('\n') : 'No matches.';
    },
  });

  return [readFileTool, writeFileTool, editFileTool, listFilesTool, grepTool];
}
