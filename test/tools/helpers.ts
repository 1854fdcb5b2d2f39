import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach } from 'vitest';
import { type BusEvent, createBus } from '../../src/bus/index.js';
import type { ToolContext } from '../../src/tools/index.js';
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
