import type { Logger } from '../../util/index.js';
import type { WorkflowRecordStore, WorkflowRecordWriter } from '../record-store.js';
import type { RunOwner } from '../run-owners.js';
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
 * store (an in-memory engine) it does nothing. A run holds `owner`'s lease from its first write until the
 * writes of its end landed, so the process's lease is renewed while it has a run to finish.
 */
export function createPersister(
  records: WorkflowRecordStore | undefined,
  logger: Logger,
  owner?: RunOwner,
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
    if (run.finished && run.holdsLease && run.pendingWrites === undefined) {
      run.holdsLease = false;
      owner?.release();
    }
  }
  return (run, write) => {
    if (run.pendingWrites) {
      run.pendingWrites.push(write);
      return;
    }
    if (owner && !run.holdsLease && !run.finished) {
      run.holdsLease = true;
      owner.hold();
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
