import { AgentdError, ErrorCodes, UserInputError } from '../../util/index.js';
import { itemMovedOn, type WorkItem, type WorkState } from '../../work/index.js';
import { checkIdle, type PoolState, wakeAll } from './state.js';
import type { PoolSelector, WorkerPoolSnapshot } from './types.js';

/** The items of the selector that are in one of `states`, oldest first. */
export async function select(
  pool: PoolState,
  selector: PoolSelector,
  states: ReadonlyArray<WorkState>,
): Promise<WorkItem[]> {
  const { queue } = pool;
  if (selector.ids) {
    return (await queue.getMany(selector.ids)).filter(
      (item) =>
        states.includes(item.state) &&
        (selector.sessionKey === undefined || item.sessionKey === selector.sessionKey) &&
        (selector.agentId === undefined || item.agentId === selector.agentId),
    );
  }
  if (selector.sessionKey === undefined && selector.agentId === undefined) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: 'say which tasks: a session, an agent or ids.',
    });
  }
  // Oldest first: resumed items then run in the order they were submitted, whatever claims them meanwhile.
  return queue.list({
    states,
    order: 'oldest',
    ...(selector.sessionKey !== undefined ? { sessionKey: selector.sessionKey } : {}),
    ...(selector.agentId !== undefined ? { agentId: selector.agentId } : {}),
    limit: 10_000,
  });
}

/**
 * Applies `action` to each item and returns the ids changed. Any other failure (a full disk's
 * STORE_UNAVAILABLE) stops it and reaches the caller, who must not read an empty answer as "nothing to do";
 * the items changed before it stay changed, so the error names them in `details.done`.
 */
async function applyEach(
  pool: PoolState,
  items: WorkItem[],
  action: (item: WorkItem) => Promise<unknown>,
): Promise<string[]> {
  const done: string[] = [];
  for (const item of items) {
    try {
      await action(item);
      done.push(item.id);
    } catch (error) {
      // Moved on between the read and the change: the selector no longer covers it.
      if (itemMovedOn(error)) {
        pool.logger.debug({ err: error, workItemId: item.id }, 'pool action skipped an item');
        continue;
      }
      if (!AgentdError.isInstance(error)) throw error;
      throw new AgentdError({
        code: error.code,
        fault: error.fault,
        retryable: error.retryable,
        message: done.length > 0 ? `${error.message} (already done: ${done.join(', ')})` : error.message,
        details: { ...error.details, workItemId: item.id, done },
        cause: error,
      });
    }
  }
  return done;
}

/** Without a selector: stop claiming. With one: pause those items (running ones are aborted now). */
export async function pauseItems(pool: PoolState, selector?: PoolSelector): Promise<string[]> {
  if (!selector) {
    pool.paused = true;
    return [];
  }
  const items = await select(pool, selector, ['queued', 'blocked', 'claimed', 'running']);
  return applyEach(pool, items, (item) => pool.queue.pause(item.id, { reason: 'paused by request' }));
}

/** Without a selector: claim again. With one: resume those paused items. */
export async function resumeItems(pool: PoolState, selector?: PoolSelector): Promise<string[]> {
  if (!selector) {
    pool.paused = false;
    wakeAll(pool);
    return [];
  }
  const items = await select(pool, selector, ['paused']);
  return applyEach(pool, items, (item) => pool.queue.resume(item.id));
}

/** Cancels the items (and their children); they leave the admission queues. */
export async function cancelItems(pool: PoolState, selector: PoolSelector): Promise<string[]> {
  const items = await select(pool, selector, ['queued', 'blocked', 'claimed', 'running', 'paused']);
  try {
    return await applyEach(pool, items, async (item) => {
      await pool.queue.cancel(item.id, { reason: 'cancelled by request' });
      for (const state of pool.classes) state.admitted.delete(item.id);
    });
  } finally {
    // Also when a later item's cancel failed: the ones before it are cancelled and wait for nothing.
    checkIdle(pool);
  }
}

export async function snapshot(
  pool: PoolState,
  selector: Pick<PoolSelector, 'sessionKey' | 'agentId'> = {},
): Promise<WorkerPoolSnapshot> {
  const counts = await pool.queue.counts(selector);
  const activeHere = [...pool.running.values()].filter(
    (entry) =>
      (selector.sessionKey === undefined || entry.item.sessionKey === selector.sessionKey) &&
      (selector.agentId === undefined || entry.item.agentId === selector.agentId),
  );
  return {
    workerId: pool.workerId,
    running: pool.started && !pool.stopped,
    paused: pool.paused,
    classes: Object.fromEntries(
      pool.classes.map((state) => [
        state.name,
        {
          concurrency: state.options.concurrency,
          active: state.active,
          waiting: state.admitted.size,
          admissionQueueSize: state.options.admissionQueueSize,
        },
      ]),
    ),
    counts: {
      queued: counts.queued,
      active: counts.claimed + counts.running,
      paused: counts.paused,
      blocked: counts.blocked,
    },
    active: activeHere.map((entry) => ({
      workItemId: entry.item.id,
      title: entry.item.title,
      className: entry.className,
      sessionKey: entry.item.sessionKey,
    })),
  };
}
