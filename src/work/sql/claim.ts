import type { SqlValue } from '../../store/index.js';
import { rowToWorkItem, type WorkItemRow } from '../rows.js';
import type { ClaimFilter, WorkItem } from '../types.js';
import {
  aheadKey,
  claimsAhead,
  noteClaimed,
  noteHandedOut,
  takeAhead,
  takesFromBuffer,
  workClaimCall,
  workClaimParams,
} from './ahead.js';
import { noteDeadline, type QueueContext } from './context.js';
import { eventBase, publish } from './events.js';
import { inList } from './guards.js';
import { reapExpiredLeases } from './reap.js';

/** The claim filter as extra `AND …` conditions on `work_items`. */
export function claimFilterSql(filter: ClaimFilter | undefined): { sql: string; params: SqlValue[] } {
  let sql = '';
  const params: SqlValue[] = [];
  if (filter?.kinds && filter.kinds.length > 0) {
    sql += ` AND kind IN (${inList(filter.kinds)})`;
    params.push(...filter.kinds);
  }
  if (filter?.excludeKinds && filter.excludeKinds.length > 0) {
    sql += ` AND kind NOT IN (${inList(filter.excludeKinds)})`;
    params.push(...filter.excludeKinds);
  }
  if (filter?.agentIds && filter.agentIds.length > 0) {
    sql += ` AND agent_id IN (${inList(filter.agentIds)})`;
    params.push(...filter.agentIds);
  }
  return { sql, params };
}

/** One claiming statement: up to `limit` ready items, highest priority first, then oldest. */
export async function claimOnce(
  ctx: QueueContext,
  workerId: string,
  limit: number,
  filter: ClaimFilter | undefined,
): Promise<WorkItem[]> {
  const now = ctx.clock.now();
  const leaseMs = filter?.leaseMs ?? ctx.config.leaseMs;
  let rows: WorkItemRow[];
  if (ctx.isPostgres) {
    // migrations/postgres/0007_work_perf.sql: the same statement as below, with its plan pinned.
    rows = await ctx.db.all<WorkItemRow>(
      `SELECT * FROM ${workClaimCall}`,
      workClaimParams(now, limit, workerId, leaseMs, filter),
    );
  } else {
    // One statement: SQLite's single writer makes it atomic, in this process and across processes, so the
    // rows the subquery picks are still queued when they are updated. INDEXED BY for the reason the
    // Postgres function pins its plan: without statistics SQLite sorts every queued row on each claim
    // (1.2 ms instead of 0.23 ms per claim of 8 with 3,000 queued).
    const extra = claimFilterSql(filter);
    const assignments = `state = '${filter?.start ? 'running' : 'claimed'}', lease_owner = ?, lease_expires_at = ?, attempts = attempts + 1, updated_at = ?, state_reason = NULL${filter?.start ? ', started_at = ?' : ''}`;
    const setParams: SqlValue[] = [workerId, now + leaseMs, now, ...(filter?.start ? [now] : [])];
    rows = await ctx.db.all<WorkItemRow>(
      `UPDATE work_items SET ${assignments} WHERE id IN (SELECT id FROM work_items INDEXED BY work_items_ready WHERE state = 'queued' AND run_after <= ?${extra.sql} ORDER BY priority DESC, created_at, id LIMIT ?) RETURNING *`,
      [...setParams, now, ...extra.params, limit],
    );
  }
  const items = rows
    .map(rowToWorkItem)
    .sort((left, right) => right.priority - left.priority || left.createdAt - right.createdAt);
  if (items.length > 0) noteDeadline(ctx.state, now + leaseMs);
  announceClaimed(ctx, workerId, items, filter);
  return items;
}

/** `work:claimed` (and `work:started` for a claim that starts) for items now in the worker's hands. */
function announceClaimed(
  ctx: QueueContext,
  workerId: string,
  items: ReadonlyArray<WorkItem>,
  filter: ClaimFilter | undefined,
): void {
  const now = ctx.clock.now();
  const leaseMs = filter?.leaseMs ?? ctx.config.leaseMs;
  for (const item of items) {
    publish(ctx, 'work:claimed', item, {
      ...eventBase(item),
      state: 'claimed',
      workerId,
      attempt: item.attempts,
      leaseExpiresAt: item.leaseExpiresAt ?? now + leaseMs,
    });
    if (filter?.start)
      publish(ctx, 'work:started', item, { ...eventBase(item), workerId, attempt: item.attempts });
  }
}

/** Claims up to `limit` ready items; with none ready, reaps lapsed leases (at most once a second) and retries. */
export async function claimBatch(
  ctx: QueueContext,
  workerId: string,
  limit: number,
  filter?: ClaimFilter,
): Promise<WorkItem[]> {
  if (ctx.state.closed) return [];
  if (!takesFromBuffer(ctx, filter)) return claimFromQueue(ctx, workerId, limit, filter);
  // Items claimed ahead by this worker's completions or handed off to it first: they were the next in line
  // when claimed.
  const key = aheadKey(workerId, filter);
  const ahead = takeAhead(ctx, key, limit);
  announceClaimed(ctx, workerId, ahead, filter);
  let items = ahead;
  // A worker whose last claim found the queue dry (items handed off to it while it waited, say) starts
  // what it was given without a claim that would only come back empty: anything submitted since woke it.
  if (ahead.length < limit && (ahead.length === 0 || ctx.state.backlogged.has(key))) {
    try {
      const claimed = await claimFromQueue(ctx, workerId, limit - ahead.length, filter);
      noteClaimed(ctx, key, limit - ahead.length, claimed.length);
      items = [...ahead, ...claimed];
    } catch (error) {
      // The items taken from the buffer are the worker's all the same; without them it would sit on them.
      if (ahead.length === 0) throw error;
      ctx.logger.warn({ err: error, workerId }, 'claiming beyond the items claimed ahead failed');
    }
  }
  // Only completions that claim ahead look up what was handed out.
  if (claimsAhead(ctx, filter)) noteHandedOut(ctx, key, workerId, filter, items);
  return items;
}

async function claimFromQueue(
  ctx: QueueContext,
  workerId: string,
  limit: number,
  filter: ClaimFilter | undefined,
): Promise<WorkItem[]> {
  const items = await claimOnce(ctx, workerId, limit, filter);
  if (items.length > 0) return items;
  // Nothing ready: a lapsed lease may be hiding work. Reaping is cheap but not free, so at most once a second.
  if (ctx.clock.now() - ctx.state.lastReapAt < 1_000) return items;
  const reaped = await reapExpiredLeases(ctx);
  if (reaped.requeued.length === 0 && reaped.unblocked.length === 0) return items;
  return claimOnce(ctx, workerId, limit, filter);
}
