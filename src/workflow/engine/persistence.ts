import type { Logger } from '../../util/logger.js';
import type { WorkflowRecordStore } from '../record-store.js';
import type { Run } from './run-state.js';

export type PersistWrite = (store: WorkflowRecordStore) => Promise<void>;

/**
 * Queues a write on the run's chain, so records land in order without blocking the next stage's work. A
 * failed write is logged and the chain continues: the run in memory stays authoritative for its caller.
 * Without a record store (an in-memory engine) it does nothing.
 */
export function createPersister(
  records: WorkflowRecordStore | undefined,
  logger: Logger,
): (run: Run, write: PersistWrite) => void {
  if (!records) return () => {};
  return (run, write) => {
    run.persistQueue = run.persistQueue.then(() =>
      write(records).catch((error) => {
        logger.error({ err: error, rootTaskId: run.root.taskId }, 'persisting a workflow record failed');
      }),
    );
  };
}
