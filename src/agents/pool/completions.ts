import type { WorkCompletion, WorkItem } from '../../work/index.js';
import type { PoolState } from './state.js';

/** Completions per statement at most. */
const maxCompletionBatch = 64;

/**
 * Completions share statements: while one is on its way to the database, items finishing meanwhile wait
 * for the next, which takes them all. A busy pool pays one statement and one commit per batch instead of
 * per item, and each item keeps its own guard and result (completeMany). On Postgres this took the bench's
 * drain from about 1,500 to 3,000–3,900 jobs/s; a second statement in flight made smaller batches and was
 * slower (2,500–2,700).
 *
 * A statement leaves at the end of the event-loop turn its first completion came in (`setImmediate`), not
 * at once: the items a completion statement hands back (claim-ahead) start, and short ones finish, in the
 * microtasks after it returns. Sent at once, the first of them went alone and the rest waited for it, so
 * the batches alternated between 1 and 24 items (two statements per 25 completions at concurrency 24, the
 * queue benchmark's drain); now they take a turn's completions together. Splitting a turn's batch over two
 * statements in flight was no faster (bench/results/queue.md).
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
