import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { createWorkflowDispatch, workflowRunKind } from '../../src/runtime/workflow-dispatch.js';
import { createSqliteDatabase, migrate, type SqlDatabase } from '../../src/store/index.js';
import { createManualClock, createSequentialIdGenerator } from '../../src/util/index.js';
import { createWorkQueue } from '../../src/work/index.js';
import type { WorkflowFunctionContext } from '../../src/workflow/index.js';
import { edge, node, trackedEngines, workflowYaml } from '../workflow/helpers.js';

let db: SqlDatabase | undefined;
afterEach(async () => {
  await db?.close();
  db = undefined;
});

async function setup() {
  db = createSqliteDatabase({ path: ':memory:' });
  await migrate(db);
  const clock = createManualClock();
  const bus = createBus({ clock });
  const queue = createWorkQueue({ db, bus, clock, idGenerator: createSequentialIdGenerator() });
  const dispatch = createWorkflowDispatch(queue);
  dispatch.watch(bus);
  const itemOf = async (taskId: string) => {
    for (;;) {
      const items = await queue.list({ kind: workflowRunKind });
      const item = items.find((candidate) => candidate.params.taskId === taskId);
      if (item) return item;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };
  return { queue, dispatch, itemOf };
}

const executed = async () => 'completed' as const;
/** `promise`, or a rejection naming `what` when it has not settled within two seconds. */
function promptly<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not end within 2 s`)), 2_000);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** The context of a worker that nothing aborts. */
const worker = () => ({ signal: new AbortController().signal });

describe('workflow dispatch', () => {
  it('rejects ABORTED when the item is cancelled before a worker takes it', async () => {
    const { queue, dispatch, itemOf } = await setup();
    const result = dispatch.dispatch('t1', executed, 'wf');
    const item = await itemOf('t1');
    await queue.cancel(item.id, { reason: 'not needed' });
    await expect(result).rejects.toMatchObject({
      code: 'ABORTED',
      message: expect.stringContaining(item.id),
    });
    // Nothing waits for it any more: a worker that takes such an item finds no run.
    await expect(dispatch.runItem(item, worker())).rejects.toMatchObject({ code: 'INTERNAL' });
  });

  it("rejects with the item's error when it fails elsewhere before this process runs it", async () => {
    const { queue, dispatch, itemOf } = await setup();
    const result = dispatch.dispatch('t1', executed, 'wf');
    const item = await itemOf('t1');
    await queue.claim('another-process');
    await queue.fail(item.id, 'another-process', { code: 'GONE', message: 'not mine', retryable: false });
    await expect(result).rejects.toMatchObject({
      code: 'GONE',
      message: expect.stringContaining('not mine'),
    });
  });

  it('cancels the waiting item when the run is cancelled, also before the submission answered', async () => {
    const { queue, dispatch, itemOf } = await setup();
    const waiting = new AbortController();
    const first = dispatch.dispatch('t1', executed, 'wf', waiting.signal);
    const item = await itemOf('t1');
    waiting.abort();
    await expect(first).rejects.toMatchObject({ code: 'ABORTED' });
    await dispatch.idle();
    expect((await queue.get(item.id))?.state).toBe('cancelled');

    const early = new AbortController();
    const second = dispatch.dispatch('t2', executed, 'wf', early.signal);
    early.abort();
    await expect(second).rejects.toMatchObject({ code: 'ABORTED' });
    const secondItem = await itemOf('t2');
    await dispatch.idle();
    expect((await queue.get(secondItem.id))?.state).toBe('cancelled');

    const aborted = new AbortController();
    aborted.abort();
    await expect(dispatch.dispatch('t3', executed, 'wf', aborted.signal)).rejects.toMatchObject({
      code: 'ABORTED',
    });
  });

  it('refuses a task id that is already waiting, here or on the queue, and still runs the first', async () => {
    const { queue, dispatch, itemOf } = await setup();
    const first = dispatch.dispatch('shared', executed, 'wf-a');
    await expect(dispatch.dispatch('shared', executed, 'wf-b')).rejects.toMatchObject({ code: 'CONFLICT' });
    const item = await itemOf('shared');
    await expect(dispatch.runItem(item, worker())).resolves.toEqual({
      summary: 'workflow task shared completed',
    });
    await expect(first).resolves.toBe('completed');

    // A live item of another process with the same task id: this run is refused, that item left alone.
    const other = await queue.submit({
      kind: workflowRunKind,
      params: { taskId: 'theirs' },
      dedupKey: 'workflow:theirs',
      maxAttempts: 1,
    });
    await expect(dispatch.dispatch('theirs', executed, 'wf')).rejects.toMatchObject({ code: 'CONFLICT' });
    expect((await queue.get(other.id))?.state).toBe('queued');
  });
});

/**
 * start → wait → after → done, dispatched through the queue and run as its worker would run the item:
 * `wait` blocks until its signal aborts when the run's input says `block`.
 */
describe('a dispatched workflow run that a worker executes', () => {
  const engines = trackedEngines();

  async function setupEngine() {
    const { queue, dispatch, itemOf } = await setup();
    const seen = { waited: [] as AbortSignal[], after: 0 };
    let blocked!: () => void;
    const blocking = new Promise<void>((resolve) => {
      blocked = resolve;
    });
    const engine = await engines.make(
      {
        'workflow.yaml': workflowYaml(
          [node('start', 'start'), node('wait', 'linear'), node('after', 'linear'), node('done', 'exit')],
          [edge('start', 'wait'), edge('wait', 'after'), edge('after', 'done')],
          { id: 'held' },
        ),
      },
      {
        functions: {
          wait: (input, context: WorkflowFunctionContext) => {
            seen.waited.push(context.signal);
            if (!(input as { block?: boolean }).block) return input;
            blocked();
            return new Promise((_resolve, reject) => {
              context.signal.addEventListener('abort', () => reject(context.signal.reason), { once: true });
            });
          },
          after: (input) => {
            seen.after++;
            return input;
          },
        },
        dispatch: (taskId, execute, signal) => dispatch.dispatch(taskId, execute, 'held', signal),
      },
    );
    return { engine, dispatch, itemOf, queue, seen, blocking };
  }

  it("cancels the executing run when the worker's signal aborts, and stops its node", async () => {
    const { engine, dispatch, itemOf, seen, blocking } = await setupEngine();
    const { taskId, result } = engine.enqueue({ block: true });
    const item = await itemOf(taskId);
    const running = new AbortController();
    const ran = dispatch.runItem(item, { signal: running.signal });
    await blocking;
    running.abort(new Error('work item cancelled'));

    await expect(promptly('the cancelled run', result)).resolves.toMatchObject({
      status: 'failure',
      state: 'cancelled',
      error: { code: 'ABORTED' },
    });
    await promptly("the worker's run of the item", ran);
    expect(seen.waited[0]?.aborted).toBe(true);
    expect(seen.after).toBe(0);
    expect(engine.status(taskId)).toMatchObject({ state: 'cancelled', status: 'failure' });
    // Its scheduler slot (max_concurrency 1) is free: the next run is dispatched.
    const next = engine.enqueue({ block: false });
    await dispatch.runItem(await itemOf(next.taskId), worker());
    await expect(next.result).resolves.toMatchObject({ status: 'success' });
  });

  it('cancels at once a run whose worker was aborted before it began', async () => {
    const { engine, dispatch, itemOf, seen } = await setupEngine();
    const { taskId, result } = engine.enqueue({ block: true });
    await promptly(
      "the worker's run of the item",
      dispatch.runItem(await itemOf(taskId), { signal: AbortSignal.abort() }),
    );

    await expect(result).resolves.toMatchObject({ state: 'cancelled', error: { code: 'ABORTED' } });
    expect(seen.waited).toEqual([]);
    expect(seen.after).toBe(0);
  });

  it("stops listening to the worker's signal when the run ends", async () => {
    const { engine, dispatch, itemOf, seen } = await setupEngine();
    const { taskId, result } = engine.enqueue({ block: false });
    const running = new AbortController();
    await dispatch.runItem(await itemOf(taskId), { signal: running.signal });

    await expect(result).resolves.toMatchObject({ status: 'success' });
    expect(seen.after).toBe(1);
    expect(getEventListeners(running.signal, 'abort')).toHaveLength(0);
  });
});
