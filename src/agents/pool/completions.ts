import type { WorkCompletion, WorkItem } from '../../work/index.js';
import type { PoolState } from './state.js';

/** Completions per statement at most. */
const maxCompletionBatch = 64;

/**
 * Completions share statements: a statement leaves at the end of the event-loop turn its first completion
 * came in (`setImmediate`) with every completion of that turn, and while it is on its way the items
 * finishing meanwhile wait for the next. A busy pool pays one statement and one commit per batch instead of
 * per item, and each item keeps its own guard and result (completeMany).
 *
 * Why the turn: the items a completion statement hands back (claim-ahead) start, and short ones finish, in
 * the microtasks after it returns. Sent at once, the first of them went alone and the rest waited for it:
 * the queue benchmark's drain (concurrency 24) alternated batches of 1 and 24, 400 statements per 5,000
 * jobs; by turn it sends 208. A second statement in flight, each with part of the batch, was slower or no
 * faster every time it was measured (bench/results/queue.md).
 */
function flushCompletions(pool: PoolState): void {
  if (pool.completing || pool.pendingCompletions.length === 0) return;
  const batch = pool.pendingCompletions.splice(0, maxCompletionBatch);
  pool.completing = true;
  pool.queue
    .completeMany(
      pool.workerId,
      batch.map((entry) => entry.completion),
    )
    .then(
      (results) => {
        for (const [index, entry] of batch.entries()) entry.settle(results[index]!);
      },
      (error: unknown) => {
        for (const entry of batch) entry.settle({ status: 'rejected', reason: error });
      },
    )
    .finally(() => {
      pool.completing = false;
      scheduleFlush(pool);
    });
}

function scheduleFlush(pool: PoolState): void {
  if (pool.flushScheduled || pool.pendingCompletions.length === 0) return;
  pool.flushScheduled = true;
  setImmediate(() => {
    pool.flushScheduled = false;
    flushCompletions(pool);
  });
}

/** Completes one item in the next batched statement; resolves or rejects with that item's own result. */
export function complete(pool: PoolState, completion: WorkCompletion & { id: string }): Promise<WorkItem> {
  return new Promise<WorkItem>((resolve, reject) => {
    pool.pendingCompletions.push({
      completion,
      settle: (result) => (result.status === 'fulfilled' ? resolve(result.value) : reject(result.reason)),
    });
    if (!pool.completing) scheduleFlush(pool);
  });
}
