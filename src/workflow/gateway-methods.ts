import { z } from 'zod';
import { ErrorCodes, UserInputError } from '../util/index.js';
import type { WorkflowEngine, WorkflowRunResult } from './engine/index.js';
import type { TaskStatusView } from './task.js';

/**
 * Handlers for the gateway methods `workflow.run`, `workflow.status` and `workflow.cancel`, as plain
 * functions with zod param schemas: the gateway (L5) registers them in its method table; this layer does
 * not import the gateway. Node events reach clients through the engine's `publish` option (`workflow:*`
 * bus events), which the gateway already streams.
 */
export const workflowRunParamsSchema = z.strictObject({
  /** Workflow directory (resolved by the host, which decides which directories are allowed). */
  dir: z.string().min(1),
  input: z.unknown().optional(),
  /** Wait for the run to end (default) or return the task id as soon as it is queued. */
  wait: z.boolean().default(true),
  taskId: z.string().min(1).max(128).optional(),
});
export const workflowStatusParamsSchema = z.strictObject({ taskId: z.string().min(1) });
export const workflowCancelParamsSchema = z.strictObject({ taskId: z.string().min(1) });

const maxTrackedTasks = 10_000;

export interface WorkflowMethodHandlers {
  run(
    params: unknown,
    context?: { signal?: AbortSignal },
  ): Promise<{ taskId: string; result?: WorkflowRunResult }>;
  status(params: unknown): Promise<{ task: TaskStatusView }>;
  cancel(params: unknown): Promise<{ taskId: string; cancelled: boolean }>;
}

function parse<T>(schema: z.ZodType<T>, params: unknown, method: string): T {
  const result = schema.safeParse(params ?? {});
  if (!result.success) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `${method}: ${result.error.issues.map((issue) => `${issue.path.join('.') || '(params)'}: ${issue.message}`).join('; ')}`,
    });
  }
  return result.data;
}

export function createWorkflowMethodHandlers(deps: {
  /** Returns the (cached) engine of a workflow directory; the host validates the path. */
  engineFor(dir: string): Promise<WorkflowEngine>;
}): WorkflowMethodHandlers {
  const engineByTask = new Map<string, WorkflowEngine>();
  const find = (taskId: string): WorkflowEngine => {
    const engine =
      engineByTask.get(taskId) ??
      [...new Set(engineByTask.values())].find((candidate) => candidate.status(taskId));
    if (!engine)
      throw new UserInputError({ code: ErrorCodes.notFound, message: `no workflow task ${taskId}` });
    return engine;
  };
  return {
    async run(params, context = {}) {
      const { dir, input, wait, taskId } = parse(workflowRunParamsSchema, params, 'workflow.run');
      const engine = await deps.engineFor(dir);
      const queued = engine.enqueue(input ?? null, {
        ...(taskId ? { taskId } : {}),
        ...(context.signal ? { signal: context.signal } : {}),
      });
      engineByTask.set(queued.taskId, engine);
      if (engineByTask.size > maxTrackedTasks) engineByTask.delete(engineByTask.keys().next().value!);
      if (!wait) return { taskId: queued.taskId };
      return { taskId: queued.taskId, result: await queued.result };
    },
    async status(params) {
      const { taskId } = parse(workflowStatusParamsSchema, params, 'workflow.status');
      const task = find(taskId).status(taskId);
      if (!task)
        throw new UserInputError({ code: ErrorCodes.notFound, message: `no workflow task ${taskId}` });
      return { task };
    },
    async cancel(params) {
      const { taskId } = parse(workflowCancelParamsSchema, params, 'workflow.cancel');
      return { taskId, cancelled: find(taskId).cancel(taskId) };
    },
  };
}
