import type { Logger } from '../../util/index.js';
import type { WorkflowRecordStore, WorkflowRecordWriter } from '../record-store.js';
import type { Run } from './run-state.js';

export type PersistWrite = (writer: WorkflowRecordWriter) => Promise<void>;

// Taken at load, so a test that fakes timers later does not stall every durable run's writes.
const nextTurn = setImmediate;

/**
 * Queues a write of a run. Writes gather until the event loop turns and then land in order, in one
 * transaction: a burst of fast stages costs one commit instead of one per row, and a stage that waits on
 * I/O lets everything before it land first. When a batch fails, its writes are retried one by one so
 * that one bad record cannot take the others with it; a write that still fails is logged, counted on the
 * run (`run.unwritten`, which its result reports: see `settleRun`) and the chain goes on. Without a record
 * store (an in-memory engine) it does nothing.
 */
export function createPersister(
  records: WorkflowRecordStore | undefined,
  logger: Logger,
): (run: Run, write: PersistWrite) => void {
  if (!records) return () => {};
  const failed = (run: Run, error: unknown) => {
    logger.error({ err: error, rootTaskId: run.root.taskId }, 'persisting a workflow record failed');
    if (run.unwritten) run.unwritten.count++;
    else run.unwritten = { count: 1, error };
  };
  async function flush(run: Run, writes: PersistWrite[]): Promise<void> {
    try {
      await records!.batch(async (writer) => {
        for (const write of writes) await write(writer);
      });
    } catch {
      for (const write of writes) await write(records!).catch((error) => failed(run, error));
    }
  }
  return (run, write) => {
    if (run.pendingWrites) {
      run.pendingWrites.push(write);
      return;
    }
    const writes = [write];
    run.pendingWrites = writes;
    const turned = new Promise<void>((resolve) => nextTurn(resolve));
    run.persistQueue = run.persistQueue.then(async () => {
      await turned;
      run.pendingWrites = undefined;
      await flush(run, writes);
    });
  };
}
