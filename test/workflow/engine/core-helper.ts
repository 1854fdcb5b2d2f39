import { createManualClock, createSequentialIdGenerator } from '../../../src/util/index.js';
import type { EngineCore } from '../../../src/workflow/engine/core.js';
import { createRunState, newTaskRecord, type Run, rootSpec } from '../../../src/workflow/engine/run-state.js';
import { type EngineSetup, setupEngine } from '../../../src/workflow/engine/setup.js';
import type { CreateWorkflowEngineOptions } from '../../../src/workflow/engine/types.js';
import { loadWorkflow } from '../../../src/workflow/index.js';
import { writeWorkflow } from '../helpers.js';

/** The core an engine's steps share, built from manifests the way `createWorkflowEngine` builds it. */
export async function setupFor(
  files: Record<string, unknown>,
  options: Omit<CreateWorkflowEngineOptions, 'workflow'> = {},
): Promise<EngineSetup> {
  const dir = writeWorkflow(files);
  const workflow = await loadWorkflow(dir);
  return setupEngine({
    workflow,
    clock: createManualClock(),
    idGenerator: createSequentialIdGenerator(),
    workDir: dir,
    ...options,
  });
}

export async function coreFor(
  files: Record<string, unknown>,
  options: Omit<CreateWorkflowEngineOptions, 'workflow'> = {},
): Promise<EngineCore> {
  return (await setupFor(files, options)).core;
}

/** A run of `core`'s workflow with its root task indexed, not started. */
export function runOf(core: EngineCore, input: unknown = 'x', taskId = 'wft_1'): Run {
  const root = newTaskRecord(core.workflow.id, core.clock.now(), {
    taskId,
    rootTaskId: taskId,
    spec: rootSpec(taskId, input),
  });
  const run = createRunState(root, core.workflow.dag.defaultStartId!);
  core.taskIndex.set(taskId, run);
  return run;
}
