import { ErrorCodes, SystemError } from '../util/index.js';
import type { WorkItem, WorkQueue } from '../work/index.js';

export const workflowRunKind = 'workflow.run';

type RunResult = 'completed' | 'failed';

interface PendingRun {
  execute: () => Promise<RunResult>;
  resolve: (result: RunResult) => void;
  reject: (error: unknown) => void;
}

/**
 * Puts workflow runs on the durable work queue: the scheduler of a workflow (FIFO, `max_concurrency`,
 * `max_queue_size` from scheduler.yaml) decides when a run starts, and the run itself is then a work item of
 * kind `workflow.run` that a worker of the pool's `workflow` class claims and executes. A run whose process
 * went away (the closure that executes it lives in memory) fails clearly instead of hanging.
 */
export interface WorkflowDispatch {
  dispatch(taskId: string, execute: () => Promise<RunResult>, workflowId: string): Promise<RunResult>;
  runItem(item: WorkItem): Promise<{ summary: string }>;
}

export function createWorkflowDispatch(queue: WorkQueue): WorkflowDispatch {
  const pending = new Map<string, PendingRun>();
  return {
    dispatch(taskId, execute, workflowId) {
      return new Promise<RunResult>((resolve, reject) => {
        pending.set(taskId, { execute, resolve, reject });
        queue
          .submit({
            kind: workflowRunKind,
            title: `workflow ${workflowId}: task ${taskId}`,
            agentId: 'workflow',
            params: { taskId, workflowId },
            dedupKey: `workflow:${taskId}`,
            maxAttempts: 1,
          })
          .catch((error: unknown) => {
            pending.delete(taskId);
            reject(error);
          });
      });
    },
    async runItem(item) {
      const taskId = String(item.params.taskId);
      const run = pending.get(taskId);
      if (!run) {
        throw new SystemError({
          code: ErrorCodes.internal,
          message: `workflow task ${taskId} was started by an agentd process that is gone; run the workflow again`,
        });
      }
      pending.delete(taskId);
      try {
        const result = await run.execute();
        run.resolve(result);
        return { summary: `workflow task ${taskId} ${result}` };
      } catch (error) {
        run.reject(error);
        throw error;
      }
    },
  };
}
