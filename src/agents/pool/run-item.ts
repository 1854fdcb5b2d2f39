import { markSpanFailed, runInSpan, SpanAttributes, startSpan } from '../../telemetry/index.js';
import { AgentdError, isStoreUnavailable, retrying } from '../../util/index.js';
import { outcomeSummary, WorkErrorCodes, type WorkItem } from '../../work/index.js';
import { complete } from './completions.js';
import {
  type ClassState,
  checkIdle,
  errorPayload,
  type PoolState,
  progress,
  type Running,
  stoppingReason,
  wakeClass,
} from './state.js';

/**
 * Runs one claimed item to its end: renews the lease on a timer, completes it with the runner's value, or
 * records the failure (retried by the queue when retryable). An abort (cancel, pause, block, lost lease)
 * leaves the item's state to whoever aborted it; a stopping pool hands the item back.
 */
export async function runOne(
  pool: PoolState,
  state: ClassState,
  item: WorkItem,
  controller: AbortController,
): Promise<void> {
  const { queue, workerId, logger } = pool;
  const runner = state.options.runItem ?? pool.runItem;
  let timer: NodeJS.Timeout | undefined;
  const startedAt = performance.now();
  // A claimed item starts its own trace: whatever was active in the claim loop did not cause it.
  const span = startSpan(`work_item ${item.kind}`, {
    root: true,
    attributes: {
      [SpanAttributes.workItemId]: item.id,
      [SpanAttributes.workItemKind]: item.kind,
      [SpanAttributes.workItemAttempt]: item.attempts,
      [SpanAttributes.workerType]: state.name,
      ...(item.parentId ? { [SpanAttributes.workItemParentId]: item.parentId } : {}),
      ...(item.agentId ? { [SpanAttributes.agentId]: item.agentId } : {}),
    },
  });
  try {
    progress(pool, 'worker-started', item, `started "${item.title}"`);
    const heartbeat = async () => {
      try {
        await queue.heartbeat(item.id, workerId);
      } catch (error) {
        if (AgentdError.isInstance(error) && error.code === WorkErrorCodes.leaseExpired)
          controller.abort(error);
        throw error;
      }
    };
    timer = setInterval(() => {
      heartbeat().catch((error) => logger.warn({ err: error, workItemId: item.id }, 'lease renewal failed'));
    }, pool.heartbeatIntervalMs);
    if (controller.signal.aborted) throw controller.signal.reason;
    const data = await runInSpan(span, () =>
      runner(item, { signal: controller.signal, heartbeat, workerId }),
    );
    if (controller.signal.aborted) throw controller.signal.reason;
    const durationMs = Math.round(performance.now() - startedAt);
    const done = await reportUntilStored(pool, item, () => complete(pool, { id: item.id, data, durationMs }));
    progress(
      pool,
      'worker-completed',
      done,
      `completed "${done.title}"${outcomeSummary(done) ? `: ${outcomeSummary(done)}` : ''}`,
    );
  } catch (error) {
    if (controller.signal.aborted || pool.stopped) {
      // Cancel and pause already changed the item's state; a stopping pool hands its items back.
      if (pool.stopped && !controller.signal.aborted) controller.abort(stoppingReason);
      if (controller.signal.reason === stoppingReason) {
        await queue.release(item.id, workerId).catch(() => undefined);
      }
      progress(pool, 'worker-cancelled', item, `stopped "${item.title}"`);
      span.setAttribute(SpanAttributes.workItemOutcome, 'cancelled');
      return;
    }
    const payload = errorPayload(error);
    markSpanFailed(span, payload.code);
    if (payload.code === WorkErrorCodes.leaseExpired) {
      logger.warn({ workItemId: item.id }, 'lost the lease of a work item; its result was discarded');
      return;
    }
    try {
      const after = await reportUntilStored(pool, item, () => queue.fail(item.id, workerId, payload));
      progress(
        pool,
        'worker-failed',
        after,
        `"${item.title}" failed: ${payload.message}${after.state === 'queued' ? ' (will retry)' : ''}`,
      );
    } catch (failError) {
      logger.warn({ err: failError, workItemId: item.id }, 'could not record a failed attempt');
    }
  } finally {
    if (timer) clearInterval(timer);
    span.end();
  }
}

/**
 * Reports an item's end (its completion or its failure) until the store takes it: the work is done, and a
 * dropped database connection must not leave the item running until its lease lapses and then run it
 * again. 250 ms, doubling up to 5 s, for one lease's length (the heartbeat keeps renewing the lease
 * meanwhile); a stopping pool ends the wait.
 */
function reportUntilStored<T>(pool: PoolState, item: WorkItem, report: () => Promise<T>): Promise<T> {
  return retrying(report, {
    firstDelayMs: 250,
    maxDelayMs: 5_000,
    forMs: pool.queue.config.leaseMs,
    retryable: isStoreUnavailable,
    onRetry: (error, delayMs) =>
      pool.logger.warn(
        { err: error, workItemId: item.id, retryInMs: delayMs },
        'the store is unavailable; reporting the end of a work item again',
      ),
    signal: pool.loopController.signal,
  });
}

/** Takes a slot of the class and runs the item; the slot is freed (and waiters woken) when it ends. */
export function launch(pool: PoolState, state: ClassState, item: WorkItem): void {
  state.active++;
  state.admitted.delete(item.id);
  const controller = new AbortController();
  const entry: Running = { item, className: state.name, controller, done: Promise.resolve() };
  pool.running.set(item.id, entry);
  entry.done = runOne(pool, state, item, controller).finally(() => {
    pool.running.delete(item.id);
    state.active--;
    wakeClass(state);
    checkIdle(pool);
  });
}
