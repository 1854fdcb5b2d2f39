import type { SqlValue } from '../../store/index.js';
import type { ClaimFilter, WorkItem } from '../types.js';
import { noteDeadline, type QueueContext, wake } from './context.js';
import { notify } from './effects.js';
import { leasedStates, pgArray, stateGuard } from './guards.js';

const leased = stateGuard(leasedStates);

/**
 * Claim-ahead (Postgres, claims that start what they take). A worker that completes items it claimed
 * will claim again for the slots those completions free, so the completion statement claims that many
 * ready items for the same worker and filter too, and the next `claimBatch` takes them from here without
 * a statement of its own: one statement and one commit per completed batch instead of two. Items wait
 * here at most `aheadHoldMs`, already running under the worker's lease (a crash leaves them to be reaped
 * like any leased item); whatever waits longer, or is here when the queue closes, is handed back without
 * spending an attempt. Their `work:claimed`/`work:started` events are published when they are handed out.
 * Submissions handed off to an idle worker (both dialects, see `takeIdleSlot`) wait here the same way.
 */
export interface AheadBuffer {
  readonly workerId: string;
  readonly filter: ClaimFilter;
  /** `claimedAt` is `performance.now()` when the item was claimed ahead. */
  readonly entries: Array<{ item: WorkItem; claimedAt: number }>;
  timer: NodeJS.Timeout | undefined;
}

/** An item handed out by `claimBatch` under claim-ahead: its completion claims for the same buffer. */
export interface HandedOut {
  readonly key: string;
  readonly workerId: string;
  readonly filter: ClaimFilter;
}

/**
 * A worker of this process asleep in `waitForWork`, registered by that call while it waits: `slots` is how
 * many more items it would start now. A submission it would claim is handed to it (`takeIdleSlot`).
 */
export interface IdleClaimer {
  readonly key: string;
  readonly workerId: string;
  readonly filter: ClaimFilter;
  slots: number;
}

/** Items handed out are remembered until they complete, fail or are released; this many at most. */
const maxHandedOut = 10_000;

function aheadHoldMs(ctx: QueueContext, filter: ClaimFilter): number {
  return Math.min(1_000, Math.floor((filter.leaseMs ?? ctx.config.leaseMs) / 4));
}

export function claimsAhead(ctx: QueueContext, filter: ClaimFilter | undefined): filter is ClaimFilter {
  return ctx.isPostgres && ctx.config.claimAhead && filter?.start === true;
}

/** Whether claims with `filter` take items from a buffer: claimed ahead (Postgres) or handed off. */
export function takesFromBuffer(ctx: QueueContext, filter: ClaimFilter | undefined): filter is ClaimFilter {
  return filter?.start === true && (ctx.config.handOffToIdle || claimsAhead(ctx, filter));
}

export function aheadKey(workerId: string, filter: ClaimFilter): string {
  return JSON.stringify([
    workerId,
    filter.kinds ?? null,
    filter.excludeKinds ?? null,
    filter.agentIds ?? null,
    filter.leaseMs ?? null,
  ]);
}

/**
 * Hand-off to an idle worker. A worker waiting for work found nothing ready for it at its last claim, so a
 * submission it would take is the next item it would claim anyway: inserting it already started under
 * that worker's lease and putting it in its claim-ahead buffer saves the claim statement between the
 * submission and the start. The rest is claim-ahead's: announced when handed out, handed back if nobody
 * takes it within the hold, reaped like any leased item if the process dies.
 */
export function takeIdleSlot(
  ctx: QueueContext,
  item: { kind: string; agentId: string | null },
): IdleClaimer | undefined {
  if (!ctx.config.handOffToIdle || ctx.state.closed) return undefined;
  for (const claimer of ctx.state.idle) {
    if (claimer.slots <= 0 || !wouldClaim(claimer.filter, item)) continue;
    claimer.slots--;
    return claimer;
  }
  return undefined;
}

/** Whether a claim with `filter` may take an item of this kind and agent (the claim's own conditions). */
function wouldClaim(filter: ClaimFilter, item: { kind: string; agentId: string | null }): boolean {
  if (filter.kinds && filter.kinds.length > 0 && !filter.kinds.includes(item.kind)) return false;
  if (filter.excludeKinds?.includes(item.kind)) return false;
  if (filter.agentIds && filter.agentIds.length > 0)
    return item.agentId !== null && filter.agentIds.includes(item.agentId);
  return true;
}

/** Takes up to `limit` items claimed ahead for this worker and filter, oldest claim first. */
export function takeAhead(ctx: QueueContext, key: string, limit: number): WorkItem[] {
  const buffer = ctx.state.ahead.get(key);
  if (!buffer || buffer.entries.length === 0) return [];
  const taken = buffer.entries.splice(0, limit).map((entry) => entry.item);
  if (buffer.entries.length === 0) {
    clearTimeout(buffer.timer);
    ctx.state.ahead.delete(key);
  }
  return taken;
}

export function noteHandedOut(
  ctx: QueueContext,
  key: string,
  workerId: string,
  filter: ClaimFilter,
  items: ReadonlyArray<WorkItem>,
): void {
  const { handedOut } = ctx.state;
  for (const item of items) handedOut.set(item.id, { key, workerId, filter });
  // Items that end without this worker reporting (cancelled, lease lost) are never removed otherwise.
  for (const id of handedOut.keys()) {
    if (handedOut.size <= maxHandedOut) break;
    handedOut.delete(id);
  }
}

/** An item claimed ahead was moved by someone else (cancelled, paused, blocked): it is not handed out. */
export function dropAhead(ctx: QueueContext, id: string): void {
  for (const [key, buffer] of ctx.state.ahead) {
    const index = buffer.entries.findIndex((entry) => entry.item.id === id);
    if (index < 0) continue;
    buffer.entries.splice(index, 1);
    if (buffer.entries.length === 0) {
      clearTimeout(buffer.timer);
      ctx.state.ahead.delete(key);
    }
    return;
  }
}

/** Forgets items the worker reported on (only its own: another worker's report changes nothing). */
export function forgetHandedOut(ctx: QueueContext, workerId: string, ids: Iterable<string>): void {
  for (const id of ids)
    if (ctx.state.handedOut.get(id)?.workerId === workerId) ctx.state.handedOut.delete(id);
}

/**
 * Records what a claim from the table found: all it asked for (more is likely waiting, so completions
 * claim ahead) or fewer (the queue ran dry, so they do not). An idle worker's completions then stay one
 * plain statement: a claim ahead would only race the claim its next wake-up makes anyway, and a row it
 * takes would wait in memory for that claim to come back empty before it is handed out.
 */
export function noteClaimed(ctx: QueueContext, key: string, asked: number, got: number): void {
  if (got >= asked) ctx.state.backlogged.add(key);
  else ctx.state.backlogged.delete(key);
}

/** The claims a batch of this worker's completions makes ahead: per buffer, as many as items complete. */
export function aheadClaimsFor(
  ctx: QueueContext,
  workerId: string,
  ids: ReadonlyArray<string>,
): Array<{ key: string; filter: ClaimFilter; limit: number }> {
  if (!ctx.isPostgres || !ctx.config.claimAhead || ctx.state.closed) return [];
  const groups = new Map<string, { key: string; filter: ClaimFilter; limit: number }>();
  for (const id of ids) {
    const handed = ctx.state.handedOut.get(id);
    if (!handed || handed.workerId !== workerId || !ctx.state.backlogged.has(handed.key)) continue;
    const group = groups.get(handed.key) ?? { key: handed.key, filter: handed.filter, limit: 0 };
    group.limit++;
    groups.set(handed.key, group);
  }
  // Not less for items already waiting here: those are for slots that earlier completions free, which
  // are often still settling when the next batch goes out. Nothing is claimed ahead for slots that do
  // not come back for it (a paused or stopped pool), so this holds about one item per slot at most.
  return [...groups.values()];
}

/** `work_claim`'s arguments for a claim-ahead (the statement is in migrations/postgres/0007_work_perf.sql). */
export function workClaimParams(
  now: number,
  limit: number,
  workerId: string,
  leaseMs: number,
  filter: ClaimFilter | undefined,
): SqlValue[] {
  const list = (values: ReadonlyArray<string> | undefined) =>
    values && values.length > 0 ? pgArray(values) : null;
  return [
    now,
    limit,
    workerId,
    leaseMs,
    filter?.start === true,
    list(filter?.kinds),
    list(filter?.excludeKinds),
    list(filter?.agentIds),
  ];
}

export const workClaimCall =
  'work_claim(?::bigint, ?::integer, ?::text, ?::bigint, ?::boolean, ?::text[], ?::text[], ?::text[])';

/** Keeps items claimed ahead until the worker's next claim; wakes waiting claims so they come for them. */
export function storeAhead(
  ctx: QueueContext,
  key: string,
  workerId: string,
  filter: ClaimFilter,
  items: ReadonlyArray<WorkItem>,
): void {
  if (items.length === 0) return;
  if (ctx.state.closed) {
    // Claimed by a statement that was on its way when the queue closed: nobody will come for them.
    handBack(ctx, workerId, items).catch((error: unknown) =>
      warnNotHandedBack(ctx, workerId, items.length, error),
    );
    return;
  }
  // Real time, not the queue's clock: the hold bounds how long items sit in this process's memory.
  const now = performance.now();
  let buffer = ctx.state.ahead.get(key);
  if (!buffer) {
    buffer = { workerId, filter, entries: [], timer: undefined };
    ctx.state.ahead.set(key, buffer);
  }
  for (const item of items) buffer.entries.push({ item, claimedAt: now });
  for (const item of items) if (item.leaseExpiresAt !== null) noteDeadline(ctx.state, item.leaseExpiresAt);
  armHold(ctx, key, buffer);
  wake(ctx.state);
}

function armHold(ctx: QueueContext, key: string, buffer: AheadBuffer): void {
  if (buffer.timer || buffer.entries.length === 0) return;
  const holdMs = aheadHoldMs(ctx, buffer.filter);
  const dueIn = Math.max(0, buffer.entries[0]!.claimedAt + holdMs - performance.now());
  buffer.timer = setTimeout(() => {
    buffer.timer = undefined;
    const cutoff = performance.now() - holdMs;
    let stale = 0;
    while (stale < buffer.entries.length && buffer.entries[stale]!.claimedAt <= cutoff) stale++;
    const expired = buffer.entries.splice(0, stale).map((entry) => entry.item);
    if (buffer.entries.length === 0 && ctx.state.ahead.get(key) === buffer) ctx.state.ahead.delete(key);
    else armHold(ctx, key, buffer);
    handBack(ctx, buffer.workerId, expired).catch((error: unknown) =>
      warnNotHandedBack(ctx, buffer.workerId, expired.length, error),
    );
  }, dueIn);
  buffer.timer.unref();
}

function warnNotHandedBack(ctx: QueueContext, workerId: string, count: number, error: unknown): void {
  ctx.logger.warn(
    { err: error, workerId, count },
    'could not hand back work claimed ahead; it is reclaimed when its lease lapses',
  );
}

/**
 * Items claimed ahead that nobody took go back to `queued` as they were: no attempt spent, no event (none
 * announced their claim), their place in line kept. Other processes hear of them through NOTIFY.
 */
async function handBack(ctx: QueueContext, workerId: string, items: ReadonlyArray<WorkItem>): Promise<void> {
  if (items.length === 0) return;
  const now = ctx.clock.now();
  const ids = items.map((item) => item.id);
  await ctx.db.transaction(async (tx) => {
    await tx.run(
      `UPDATE work_items SET state = 'queued', lease_owner = NULL, lease_expires_at = NULL,
         attempts = ${ctx.isPostgres ? 'GREATEST' : 'MAX'}(attempts - 1, 0), started_at = NULL, updated_at = ?
       WHERE id ${ctx.isPostgres ? '= ANY (?::text[])' : 'IN (SELECT value FROM json_each(?))'} AND lease_owner = ? AND ${leased.sql}`,
      [now, ctx.isPostgres ? pgArray(ids) : JSON.stringify(ids), workerId, ...leased.params],
    );
    await notify(ctx, tx, { t: 'wake' });
  });
  wake(ctx.state);
}

/** Hands back everything claimed ahead (the queue is closing). */
export async function handBackAll(ctx: QueueContext): Promise<void> {
  const buffers = [...ctx.state.ahead.values()];
  ctx.state.ahead.clear();
  for (const buffer of buffers) clearTimeout(buffer.timer);
  await Promise.all(
    buffers.map((buffer) =>
      handBack(
        ctx,
        buffer.workerId,
        buffer.entries.map((entry) => entry.item),
      ),
    ),
  );
}
