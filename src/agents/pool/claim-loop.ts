import type { ClaimFilter, WorkItem } from '../../work/index.js';
import { launch } from './run-item.js';
import type { ClassState, PoolState } from './state.js';
import { wakeClass } from './state.js';

/** Claimed items start at once, so claim and start are one statement. */
export function filterFor(pool: PoolState, state: ClassState): ClaimFilter {
  return {
    start: true,
    ...(state.options.kinds
      ? { kinds: state.options.kinds }
      : pool.listedKinds.length > 0
        ? { excludeKinds: pool.listedKinds }
        : {}),
  };
}

/**
 * One claim loop of a class. Several run per class: while one claim is on its way to the database, slots
 * freed meanwhile are claimed by another, so a claim round trip does not cap throughput. Free slots are
 * reserved before a claim, so the loops together never claim more than the class may run.
 */
export async function claimLoop(pool: PoolState, state: ClassState): Promise<void> {
  const { queue, workerId, logger } = pool;
  const signal = pool.loopController.signal;
  while (!pool.stopped) {
    const free = state.options.concurrency - state.active - state.claiming;
    if (pool.paused || free <= 0 || state.waitingForWork > 0) {
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener('abort', done);
          state.waiters.delete(done);
          resolve();
        };
        state.waiters.add(done);
        signal.addEventListener('abort', done, { once: true });
      });
      continue;
    }
    const sequence = queue.wakeSequence;
    let items: WorkItem[] = [];
    state.claiming += free;
    try {
      items = await queue.claimBatch(workerId, free, filterFor(pool, state));
    } catch (error) {
      logger.error(
        { err: error, workerClass: state.name },
        'claiming work failed; retrying after the poll interval',
      );
    } finally {
      state.claiming -= free;
    }
    if (pool.stopped) {
      for (const item of items) await queue.release(item.id, workerId).catch(() => undefined);
      return;
    }
    for (const item of items) launch(pool, state, item);
    // Fewer than asked: nothing else was ready, so wait rather than claim again at once. A submission
    // during the claim already moved the sequence, and waitForWork then returns at once.
    if (items.length === free) continue;
    state.waitingForWork++;
    let waitFailed = false;
    try {
      await queue.waitForWork(signal, {
        sinceSequence: sequence,
        filter: filterFor(pool, state),
        handOff: { workerId, slots: state.options.concurrency - state.active - state.claiming },
      });
    } catch (error) {
      waitFailed = true;
      logger.error({ err: error, workerClass: state.name }, 'waiting for work failed');
    } finally {
      state.waitingForWork--;
      // The loops that held back while this one waited may claim again.
      wakeClass(state);
    }
    if (waitFailed) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, queue.config.pollIntervalMs);
        signal.addEventListener(
          'abort',
          () => {
            clearTimeout(timer);
            resolve();
          },
          { once: true },
        );
      });
    }
  }
}
