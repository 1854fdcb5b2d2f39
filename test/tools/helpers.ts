import { execFile } from 'node:child_process';
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach } from 'vitest';
import { type BusEvent, createBus } from '../../src/bus/index.js';
import { createFileTools, type ToolContext, type ToolDefinition } from '../../src/tools/index.js';
import { silentLogger } from '../../src/util/index.js';

/** A temporary folder per test, removed afterwards. */
export function useTempDirs(): () => Promise<string> {
  const made: string[] = [];
  afterEach(async () => {
    await Promise.all(made.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
  });
  return async () => {
    const dir = await realpath(await mkdtemp(path.join(tmpdir(), 'agentd-tools-')));
    made.push(dir);
    return dir;
  };
}

export function createToolContext(
  workspaceDir: string,
  overrides: Partial<ToolContext> = {},
): ToolContext & { events: BusEvent[] } {
  const bus = createBus();
  const events: BusEvent[] = [];
  bus.subscribe({}, (event) => events.push(event));
  return {
    runId: 'run_1',
    agentId: 'main',
    workItemId: 'work_1',
    toolCallId: 'call_1',
    workspaceDir,
    signal: new AbortController().signal,
    bus,
    logger: silentLogger,
    events,
    ...overrides,
  };
}

/** The repository root (for `--import tsx` and for importing src/ modules from a child process). */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * Runs `script` (an ES module; `process.argv[1..]` are `args`) through tsx in a child whose file-size limit
 * is `limitKiB` (`ulimit -f`), with SIGXFSZ ignored so a write past the limit fails with EFBIG instead of
 * killing the process. Resolves to what the script printed, parsed as JSON.
 */
export function runUnderFileSizeLimit(script: string, args: string[], limitKiB = 64): Promise<unknown> {
  const command = `trap '' XFSZ; ulimit -f ${limitKiB}; exec "$0" --import tsx --input-type=module -e "$@"`;
  return new Promise((resolve, reject) => {
    execFile(
      'bash',
      ['-c', command, process.execPath, script, ...args],
      { cwd: repoRoot, timeout: 60_000 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${error.message}\n${stderr}`));
        else resolve(JSON.parse(stdout));
      },
    );
  });
}

/** Calls the file tools (`write_file`, `edit_file`, …) by name, as the model would, in `workspace`. */
export function fileToolCaller(workspace: string) {
  const tools = new Map(createFileTools().map((tool) => [tool.name, tool]));
  const context = createToolContext(workspace);
  return (name: string, args: Record<string, unknown>) => {
    const tool = tools.get(name) as ToolDefinition;
    return tool.execute(tool.input.parse(args), context);
  };
}
