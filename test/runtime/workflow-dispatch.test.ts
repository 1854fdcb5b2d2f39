import { afterEach, describe, expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { createWorkflowDispatch, workflowRunKind } from '../../src/runtime/workflow-dispatch.js';
import { createSqliteDatabase, migrate, type SqlDatabase } from '../../src/store/index.js';
import { createManualClock, createSequentialIdGenerator } from '../../src/util/index.js';
import { createWorkQueue } from '../../src/work/index.js';

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
    await expect(dispatch.runItem(item)).rejects.toMatchObject({ code: 'INTERNAL' });
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
    await expect(dispatch.runItem(item)).resolves.toEqual({ summary: 'workflow task shared completed' });
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
