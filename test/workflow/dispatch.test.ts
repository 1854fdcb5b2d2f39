import { describe, expect, it } from 'vitest';
import { ErrorCodes, SystemError, UserInputError } from '../../src/util/index.js';
import { chainWorkflow, trackedEngines, workflowYaml } from './helpers.js';

/** A dispatch that holds every run until the test settles it: as a work item no worker has taken yet. */
function heldDispatch() {
  const held: Array<{
    taskId: string;
    execute: () => Promise<'completed' | 'failed'>;
    signal: AbortSignal;
    resolve: (result: 'completed' | 'failed') => void;
    reject: (error: unknown) => void;
  }> = [];
  return {
    held,
    dispatch: (taskId: string, execute: () => Promise<'completed' | 'failed'>, signal: AbortSignal) =>
      new Promise<'completed' | 'failed'>((resolve, reject) => {
        held.push({ taskId, execute, signal, resolve, reject });
      }),
  };
}

const files = () => {
  const { nodes, edges } = chainWorkflow(1);
  return {
    'workflow.yaml': workflowYaml(nodes, edges, { id: 'held' }),
    'scheduler.yaml': {
      scheduler: { enabled: true, max_concurrency: 1, queue_policy: 'fifo', max_queue_size: 10 },
    },
  };
};

describe('engine dispatch', () => {
  const { make } = trackedEngines();

  it('ends a run whose dispatch rejects before executing it, and frees its slot', async () => {
    const { held, dispatch } = heldDispatch();
    const engine = await make(files(), { dispatch });
    const cancelled = engine.enqueue('a');
    const failed = engine.enqueue('b');
    const runs = engine.enqueue('c');
    expect(held.map((entry) => entry.taskId)).toEqual([cancelled.taskId]);

    held[0]!.reject(new UserInputError({ code: ErrorCodes.aborted, message: 'its work item was cancelled' }));
    await expect(cancelled.result).resolves.toMatchObject({
      status: 'failure',
      state: 'cancelled',
      error: { code: 'ABORTED', message: 'its work item was cancelled' },
    });
    expect(engine.status(cancelled.taskId)).toMatchObject({ state: 'cancelled', status: 'failure' });

    // max_concurrency 1: the slot came back, so the next run was dispatched.
    expect(held.map((entry) => entry.taskId)).toEqual([cancelled.taskId, failed.taskId]);
    held[1]!.reject(new SystemError({ code: 'GONE', message: 'its work item failed' }));
    await expect(failed.result).resolves.toMatchObject({
      state: 'failed',
      error: { code: 'GONE', message: 'its work item failed' },
    });

    const last = held[2]!;
    last.resolve(await last.execute());
    await expect(runs.result).resolves.toMatchObject({ status: 'success' });
  });

  it('cancel aborts the signal the dispatch was given', async () => {
    const { held, dispatch } = heldDispatch();
    const engine = await make(files(), { dispatch });
    const run = engine.enqueue('a');
    const entry = held[0]!;
    entry.signal.addEventListener('abort', () =>
      entry.reject(new UserInputError({ code: ErrorCodes.aborted, message: 'cancelled while waiting' })),
    );
    expect(engine.cancel(run.taskId)).toBe(true);
    await expect(run.result).resolves.toMatchObject({ state: 'cancelled', error: { code: 'ABORTED' } });
  });
});
