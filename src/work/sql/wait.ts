import type { ClaimFilter } from '../types.js';
import { aheadKey, type IdleClaimer } from './ahead.js';
import { claimFilterSql } from './claim.js';
import type { QueueContext } from './context.js';
import { inList, leasedStates } from './guards.js';

/**
 * Resolves when work may be ready: a wake-up (local, or remote through LISTEN/NOTIFY), the next backoff or
 * lease deadline, or at the latest after `pollIntervalMs`. Returns at once when `sinceSequence` is stale.
 *
 * Where other processes' changes arrive as wake-ups, the deadlines read are kept for up to `pollIntervalMs`:
 * deadlines made here move them up (`noteDeadline`), a remote wake-up drops them. An idle worker woken for
 * every submission then waits again without a statement, instead of with one each time.
 *
 * With `handOff` (a worker that would start `slots` more items now), submissions of this process that the
 * worker would claim are handed to it while it waits (see `takeIdleSlot`).
 */
export async function waitForWork(
  ctx: QueueContext,
  signal?: AbortSignal,
  options: {
    sinceSequence?: number;
    filter?: ClaimFilter;
    handOff?: { workerId: string; slots: number };
  } = {},
): Promise<void> {
  const { state } = ctx;
  if (state.closed || signal?.aborted) return;
  if (options.sinceSequence !== undefined && options.sinceSequence !== state.wakeSequence) return;
  // Only items the caller may claim count as due: a worker for other kinds must sleep, not spin.
  const claimable = claimFilterSql(options.filter);
  await new Promise<void>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const { filter, handOff } = options;
    const idle: IdleClaimer | undefined =
      handOff && handOff.slots > 0 && ctx.config.handOffToIdle && filter?.start === true
        ? {
            key: aheadKey(handOff.workerId, filter),
            workerId: handOff.workerId,
            filter,
            slots: handOff.slots,
          }
        : undefined;
    const stopWaiting = () => {
      clearTimeout(timer);
      if (idle) state.idle.delete(idle);
      state.waiters.delete(done);
      signal?.removeEventListener('abort', done);
    };
    const done = () => {
      stopWaiting();
      resolve();
    };
    // Listening before the deadlines are read: a wake-up while they are on their way ends the wait at once
    // instead of after the read.
    state.waiters.add(done);
    if (idle) state.idle.add(idle);
    signal?.addEventListener('abort', done, { once: true });
    const now = ctx.clock.now();
    const schedule = (nextDue: number) => {
      if (nextDue <= now) done();
      else timer = setTimeout(done, Math.min(ctx.config.pollIntervalMs, nextDue - now));
    };
    const cacheKey = JSON.stringify([claimable.sql, claimable.params]);
    const cached = state.hearsRemoteChanges ? state.dueCache.get(cacheKey) : undefined;
    // A deadline already due is not trusted: the item may have been taken since, and the wait would spin.
    if (cached && cached.nextDue > now && now - cached.readAt < ctx.config.pollIntervalMs) {
      schedule(cached.nextDue);
      return;
    }
    const epoch = state.dueEpoch;
    ctx.db
      .get<{ next_run: number | null; next_lease: number | null }>(
        `SELECT (SELECT MIN(run_after) FROM work_items WHERE state = 'queued'${claimable.sql}) AS next_run,
                (SELECT MIN(lease_expires_at) FROM work_items WHERE state IN (${inList(leasedStates)})) AS next_lease`,
        [...claimable.params, ...leasedStates],
      )
      .then(
        (due) => {
          if (!state.waiters.has(done)) return;
          const deadlines = [due?.next_run, due?.next_lease].filter(
            (value): value is number => value !== null && value !== undefined,
          );
          const nextDue =
            deadlines.length > 0 ? Math.min(...deadlines.map(Number)) : Number.POSITIVE_INFINITY;
          if (state.hearsRemoteChanges && state.dueEpoch === epoch)
            state.dueCache.set(cacheKey, { nextDue, readAt: now });
          schedule(nextDue);
        },
        (error: unknown) => {
          if (!state.waiters.has(done)) return;
          stopWaiting();
          reject(error);
        },
      );
  });
}
