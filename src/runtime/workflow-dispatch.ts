import type { RunItemContext } from '../agents/index.js';
import type { Bus, BusEvent } from '../bus/index.js';
import { ErrorCodes, SystemError, UserInputError } from '../util/index.js';
import type { WorkItem, WorkQueue } from '../work/index.js';

export const workflowRunKind = 'workflow.run';

type RunResult = 'completed' | 'failed';

/** A run handed to the queue whose item no worker has taken yet. */
interface PendingRun {
  taskId: string;
  /** `signal` cancels the run while it executes (see `WorkflowDispatch.runItem`). */
  execute: (signal?: AbortSignal) => Promise<RunResult>;
  resolve: (result: RunResult) => void;
  reject: (error: unknown) => void;
  /** The work item, once the submission answered. */
  itemId: string | undefined;
  /** The run was cancelled before its submission answered: its item is cancelled as soon as it is known. */
  cancelled: boolean;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

type TerminalWorkEvent = BusEvent<'work:cancelled' | 'work:failed' | 'work:dead' | 'work:completed'>;

const terminalTypes = ['work:cancelled', 'work:failed', 'work:dead', 'work:completed'] as const;

/**
 * Puts workflow runs on the durable work queue: the scheduler of a workflow (FIFO, `max_concurrency`,
 * `max_queue_size` from scheduler.yaml) decides when a run starts, and the run itself is then a work item of
 * kind `workflow.run` that a worker of the pool's `workflow` class claims and executes. A run whose process
 * went away (the closure that executes it lives in memory) fails clearly instead of hanging.
 *
 * A run always ends, so that its scheduler slot comes back: when its item ends before a worker of this
 * process takes it (cancelled with `work.cancel` or `agent.control`, failed or dead in another process),
 * `dispatch` rejects — ABORTED for a cancel — once `watch` follows the bus; when the run is cancelled first
 * (`signal`: `workflow.cancel`, the engine closing), its item is cancelled and `dispatch` rejects ABORTED.
 *
 * Once a worker runs the item, the worker's signal cancels the run: the run ends `cancelled` (as after a
 * `workflow.cancel`), its executing node's signal aborts and no further node starts, and the item keeps the
 * state whoever aborted the worker gave it. That is every abort of the pool's, as none leaves anyone to
 * report the run's end: a cancelled item stays `cancelled`; a paused one cannot carry on later, here or
 * elsewhere, as its run's closure lives in this process's memory, so the item stays `paused` and, resumed,
 * fails; a lost lease is no longer this worker's (the queue kills the item, its one attempt spent); a
 * stopping pool hands the item back — it fails as a run of a process that is gone — and the engine then
 * closes without waiting for the run's nodes.
 */
export interface WorkflowDispatch {
  /**
   * Settles when the run has executed, or rejects when it never will: CONFLICT for a task id that is already
   * waiting here (another workflow's run) or on the queue (another process's), ABORTED when its item was
   * cancelled or `signal` aborted before a worker took it, the item's error when it failed before that.
   */
  dispatch(
    taskId: string,
    execute: (signal?: AbortSignal) => Promise<RunResult>,
    workflowId: string,
    signal?: AbortSignal,
  ): Promise<RunResult>;
  /**
   * Executes the run of a claimed item; `context.signal` (the worker's) cancels it while it runs. INTERNAL
   * when this process has no run waiting for the item (its process is gone, or its run was stopped before).
   */
  runItem(item: WorkItem, context: Pick<RunItemContext, 'signal'>): Promise<{ summary: string }>;
  /**
   * Follows the terminal `work:*` events of `bus` (the queue's), ending the runs whose item ends before a
   * worker takes it. Once per bus; returns the unsubscribe.
   */
  watch(bus: Bus): () => void;
  /** Resolves when the item cancels started by cancelled runs have been written. */
  idle(): Promise<void>;
}

export function createWorkflowDispatch(queue: WorkQueue): WorkflowDispatch {
  const pending = new Map<string, PendingRun>();
  const byItem = new Map<string, PendingRun>();
  const cancelling = new Set<Promise<unknown>>();
  const watched = new Map<Bus, () => void>();

  /** Takes the run out of the waiting ones (it runs, or ends without running). */
  const take = (run: PendingRun): void => {
    if (pending.get(run.taskId) === run) pending.delete(run.taskId);
    if (run.itemId !== undefined && byItem.get(run.itemId) === run) byItem.delete(run.itemId);
    if (run.onAbort) run.signal?.removeEventListener('abort', run.onAbort);
    run.onAbort = undefined;
  };

  const cancelItem = (itemId: string): void => {
    // The run has ended already; an item that meanwhile ended or was taken by a worker keeps its state
    // (a worker that takes it finds no run and fails it).
    const cancel = queue
      .cancel(itemId, { reason: 'its workflow run was cancelled', cascade: false })
      .catch(() => undefined)
      .finally(() => cancelling.delete(cancel));
    cancelling.add(cancel);
  };

  /** The run was cancelled (workflow.cancel, the engine closing) while its item waited. */
  const cancelWaiting = (run: PendingRun): void => {
    take(run);
    if (run.itemId !== undefined) cancelItem(run.itemId);
    else run.cancelled = true;
    run.reject(
      new UserInputError({
        code: ErrorCodes.aborted,
        message: 'the run was cancelled before a worker started it',
      }),
    );
  };

  /** The run's item ended before a worker of this process took it. */
  const endedUnclaimed = (run: PendingRun, event: TerminalWorkEvent): void => {
    take(run);
    const item = `the run's work item ${event.data.workItemId}`;
    switch (event.type) {
      case 'work:cancelled': {
        const { reason } = (event as BusEvent<'work:cancelled'>).data;
        run.reject(
          new UserInputError({
            code: ErrorCodes.aborted,
            message: `${item} was cancelled before a worker started it${reason ? ` (${reason})` : ''}`,
          }),
        );
        return;
      }
      case 'work:failed':
      case 'work:dead': {
        const { error } = (event as BusEvent<'work:failed' | 'work:dead'>).data;
        run.reject(
          new SystemError({
            code: error.code,
            message: `${item} ended ${event.data.state} before this process ran it: ${error.message}`,
          }),
        );
        return;
      }
      default:
        run.reject(
          new SystemError({
            code: ErrorCodes.internal,
            message: `${item} completed without this process running it`,
          }),
        );
    }
  };

  const onTerminal = (event: TerminalWorkEvent): void => {
    if (event.data.kind !== workflowRunKind) return;
    if (event.type === 'work:failed' && (event as BusEvent<'work:failed'>).data.willRetry) return;
    // An item ends after its submission answered: this process's queue publishes after the commit, and
    // another process's ending is not on this bus (its worker, finding no run, fails the item there).
    const run = byItem.get(event.data.workItemId);
    if (run) endedUnclaimed(run, event);
  };

  return {
    dispatch(taskId, execute, workflowId, signal) {
      if (pending.has(taskId)) {
        return Promise.reject(
          new UserInputError({
            code: ErrorCodes.conflict,
            message: `workflow task ${taskId} is already waiting for a worker (a run of another workflow has that task id); run it with another taskId`,
            details: { taskId },
          }),
        );
      }
      if (signal?.aborted) {
        return Promise.reject(
          new UserInputError({
            code: ErrorCodes.aborted,
            message: 'the run was cancelled before it started',
          }),
        );
      }
      return new Promise<RunResult>((resolve, reject) => {
        const run: PendingRun = {
          taskId,
          execute,
          resolve,
          reject,
          itemId: undefined,
          cancelled: false,
          signal,
          onAbort: undefined,
        };
        pending.set(taskId, run);
        if (signal) {
          run.onAbort = () => cancelWaiting(run);
          signal.addEventListener('abort', run.onAbort, { once: true });
        }
        queue
          .submit({
            kind: workflowRunKind,
            title: `workflow ${workflowId}: task ${taskId}`,
            agentId: 'workflow',
            params: { taskId, workflowId },
            dedupKey: `workflow:${taskId}`,
            maxAttempts: 1,
          })
          .then(
            (submitted) => {
              if (submitted.merged) {
                // A live item of another run with this task id (another process's): never this run's.
                if (pending.get(taskId) === run) {
                  take(run);
                  reject(
                    new UserInputError({
                      code: ErrorCodes.conflict,
                      message: `workflow task ${taskId} is already on the work queue (item ${submitted.id}); run it with another taskId`,
                      details: { taskId, workItemId: submitted.id },
                    }),
                  );
                }
                return;
              }
              if (run.cancelled) {
                cancelItem(submitted.id);
                return;
              }
              // Taken by a worker already (a submission handed to an idle worker): nothing waits any more.
              if (pending.get(taskId) !== run) return;
              run.itemId = submitted.id;
              byItem.set(submitted.id, run);
            },
            (error: unknown) => {
              if (pending.get(taskId) !== run) return;
              take(run);
              reject(error);
            },
          );
      });
    },
    async runItem(item, { signal }) {
      const taskId = String(item.params.taskId);
      const run = pending.get(taskId);
      // An item that is not the waiting run's (another process's, with the same task id) is not run here.
      if (!run || (run.itemId !== undefined && run.itemId !== item.id)) {
        throw new SystemError({
          code: ErrorCodes.internal,
          message: `workflow task ${taskId} has no run in this agentd process: the process that started it is gone, or its run was stopped (its item paused or its lease lost); run the workflow again`,
        });
      }
      take(run);
      try {
        const result = await run.execute(signal);
        run.resolve(result);
        return { summary: `workflow task ${taskId} ${result}` };
      } catch (error) {
        run.reject(error);
        throw error;
      }
    },
    watch(bus) {
      let stop = watched.get(bus);
      if (!stop) {
        const unsubscribe = bus.subscribe({ types: terminalTypes }, (event) =>
          onTerminal(event as TerminalWorkEvent),
        );
        stop = () => {
          unsubscribe();
          watched.delete(bus);
        };
        watched.set(bus, stop);
      }
      return stop;
    },
    async idle() {
      while (cancelling.size > 0) await Promise.all([...cancelling]);
    },
  };
}
