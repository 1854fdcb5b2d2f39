import { afterEach } from 'vitest';
import { z } from 'zod';
import { type Bus, type BusEvent, createBus } from '../../src/bus/index.js';
import { type EngageOptions, type EngageResult, runEngage } from '../../src/engage/index.js';
import { createLedger, type Ledger } from '../../src/ledger/index.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { createScriptedModel, type ScriptedModel, type ScriptedModelOptions } from '../../src/testing.js';
import {
  createBuiltinTools,
  createToolRegistry,
  defineTool,
  type ToolDefinition,
  type ToolRegistry,
} from '../../src/tools/index.js';
import { openTestDatabase } from '../helpers/databases.js';
import { useTempDirs } from '../tools/helpers.js';

export const tempDir = useTempDirs();

export function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

/** Resolves with the first bus event of `type` that satisfies `test`. */
export function nextEvent(
  bus: Bus,
  type: string,
  test: (event: BusEvent) => boolean = () => true,
): Promise<BusEvent> {
  return new Promise((resolve) => {
    const stop = bus.subscribe({ types: [type] }, (event) => {
      if (!test(event)) return;
      stop();
      resolve(event);
    });
  });
}

export const noopTool = defineTool({
  name: 'noop',
  description: 'does nothing',
  input: z.object({ n: z.number().int().optional() }),
  execute: async (args) => `ok ${args.n ?? ''}`.trim(),
});

export interface Harness {
  db: SqlDatabase;
  ledger: Ledger;
  bus: Bus;
  events: BusEvent[];
  registry: ToolRegistry;
  model: ScriptedModel;
  workspaceDir: string;
  run(overrides?: Partial<EngageOptions>): Promise<EngageResult>;
}

const openDatabases: SqlDatabase[] = [];
afterEach(async () => {
  await Promise.all(openDatabases.splice(0).map((db) => db.close()));
});

export async function createHarness(
  options: { tools?: ToolDefinition[]; model?: ScriptedModelOptions; userMessage?: string } = {},
): Promise<Harness> {
  const db = await openTestDatabase('sqlite');
  openDatabases.push(db);
  const ledger = createLedger({ db });
  const bus = createBus();
  const events: BusEvent[] = [];
  bus.subscribe({}, (event) => events.push(event));
  const registry = createToolRegistry([
    ...createBuiltinTools({ ledger }),
    noopTool,
    ...(options.tools ?? []),
  ]);
  const model = createScriptedModel(options.model);
  const workspaceDir = await tempDir();
  return {
    db,
    ledger,
    bus,
    events,
    registry,
    model,
    workspaceDir,
    run: (overrides = {}) =>
      runEngage({
        model,
        messages: [
          { role: 'system', content: 'You are a test agent.' },
          { role: 'user', content: options.userMessage ?? 'Do the task.' },
        ],
        tools: { registry },
        workspaceDir,
        ledger,
        workItemId: 'work_1',
        scope: { runId: 'run_1', agentId: 'main', sessionKey: 'agent:main:main' },
        bus,
        modelCallOptions: { retry: { maxAttempts: 1 } },
        ...overrides,
      }),
  };
}
