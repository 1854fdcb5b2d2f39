import { rowToWorkItem, type WorkItemRow } from '../rows.js';
import type { WorkItem } from '../types.js';
import {
  aheadClaimsFor,
  forgetHandedOut,
  noteClaimed,
  storeAhead,
  workClaimCall,
  workClaimParams,
} from './ahead.js';
import type { QueueContext } from './context.js';
import { withEffects } from './effects.js';
import { publishTerminal } from './events.js';
import { leasedStates, pgArray, refusal, stateGuard } from './guards.js';
import { getMany } from './read.js';
import { maybeUnblockParent } from './transition.js';

/** What a worker reports with a completion; `durationMs` defaults to the time since the item started. */
export interface WorkCompletion {
  data?: unknown;
  durationMs?: number;
}

// The statement assembles the outcome, `{"data":…,"durationMs":…}` as JSON.stringify writes it, from JSON
// texts made in JavaScript; a completion without `durationMs` takes the time since `started_at` from the
// row itself, so no completion reads the row first.
const completeSets = `state = 'completed', updated_at = ?, resolved_at = ?, lease_owner = NULL, lease_expires_at = NULL, waiting_on = NULL, state_reason = NULL, outcome = '{' || COALESCE('"data":' || done_input.data || ',', '') || '"durationMs":' || COALESCE(done_input.duration_ms, CAST(CAST(? AS BIGINT) - started_at AS TEXT), '0') || '}'`;
const leased = stateGuard(leasedStates);
const completeGuard = `${leased.sql} AND lease_owner = ? AND lease_expires_at > ?`;
// The batch travels as arrays (Postgres) or one JSON array (SQLite): one statement text for any batch size.
// On Postgres an item's end is announced only when another process may wait for it (child work, session
// tasks): NOTIFY serialises commits, and fire-and-forget jobs should not pay for that.
const completeSqlPostgres = `WITH done AS (
         UPDATE work_items SET ${completeSets}
         FROM unnest(?::text[], ?::text[], ?::text[]) AS done_input (id, data, duration_ms)
         WHERE work_items.id = done_input.id AND ${completeGuard}
         RETURNING work_items.*)
       SELECT done.*, CASE WHEN done.parent_id IS NOT NULL OR done.session_key IS NOT NULL
         THEN pg_notify(?, json_build_object('o', ?::text, 't', 'terminal', 'id', done.id)::text) END AS notified,
         NULL::integer AS ahead_group
       FROM done`;
// Claim-ahead (ahead.ts): each group's claim joins the statement, so completing and claiming again share
// one commit. Its rows are told apart by `ahead_group`.
const aheadBranch = (group: number) =>
  ` UNION ALL SELECT claimed.*, NULL, ${group} FROM ${workClaimCall} AS claimed`;
const completeSqlSqlite = `UPDATE work_items SET ${completeSets}
       FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS data,
                    json_extract(value, '$[2]') AS duration_ms FROM json_each(?)) AS done_input
       WHERE work_items.id = done_input.id AND ${completeGuard}
       RETURNING *`;

/**
 * Completes several of the worker's items in one statement, each under its own lease guard. One settled
 * result per entry, in order; an entry repeating an earlier id is refused as already completed.
 */
export async function completeMany(
  ctx: QueueContext,
  workerId: string,
  completions: ReadonlyArray<WorkCompletion & { id: string }>,
): Promise<Array<PromiseSettledResult<WorkItem>>> {
  if (completions.length === 0) return [];
  const now = ctx.clock.now();
  const entries = new Map<string, { data: string | null; durationMs: string | null }>();
  // Data that cannot be serialised (a cycle, a BigInt) refuses that completion only, not its batch.
  const unserialisable = new Map<string, unknown>();
  for (const completion of completions) {
    if (entries.has(completion.id) || unserialisable.has(completion.id)) continue;
    try {
      entries.set(completion.id, {
        data: completion.data === undefined ? null : (JSON.stringify(completion.data) ?? null),
        durationMs:
          typeof completion.durationMs === 'number' && Number.isFinite(completion.durationMs)
            ? JSON.stringify(completion.durationMs)
            : null,
      });
    } catch (error) {
      unserialisable.set(completion.id, error);
    }
  }
  const ids = [...entries.keys()];
  const batch = ctx.isPostgres
    ? [
        pgArray(ids),
        pgArray(ids.map((id) => entries.get(id)!.data)),
        pgArray(ids.map((id) => entries.get(id)!.durationMs)),
      ]
    : [JSON.stringify(ids.map((id) => [id, entries.get(id)!.data, entries.get(id)!.durationMs]))];
  const ahead = aheadClaimsFor(ctx, workerId, ids);
  forgetHandedOut(ctx, workerId, ids);
  const rows =
    ids.length === 0
      ? []
      : await ctx.db.all<WorkItemRow & { ahead_group?: number | null }>(
          ctx.isPostgres
            ? completeSqlPostgres + ahead.map((_, group) => aheadBranch(group)).join('')
            : completeSqlSqlite,
          [
            now,
            now,
            now,
            ...batch,
            ...leased.params,
            workerId,
            now,
            ...(ctx.isPostgres ? [ctx.channel, ctx.instanceId] : []),
            ...ahead.flatMap((group) =>
              workClaimParams(
                now,
                group.limit,
                workerId,
                group.filter.leaseMs ?? ctx.config.leaseMs,
                group.filter,
              ),
            ),
          ],
        );
  const completedRows = rows.filter((row) => row.ahead_group === null || row.ahead_group === undefined);
  for (const [group, claim] of ahead.entries()) {
    const claimed = rows
      .filter((row) => row.ahead_group === group)
      .map(rowToWorkItem)
      .sort((left, right) => right.priority - left.priority || left.createdAt - right.createdAt);
    noteClaimed(ctx, claim.key, claim.limit, claimed.length);
    storeAhead(ctx, claim.key, workerId, claim.filter, claimed);
  }
  const done = new Map(completedRows.map((row) => [row.id, rowToWorkItem(row)]));
  const missed = ids.filter((id) => !done.has(id));
  // The statement touched only rows whose guard held; the others are read back to say why.
  const current = new Map((await getMany(ctx, missed)).map((item) => [item.id, item]));
  const reported = new Set<string>();
  const results = completions.map((completion): PromiseSettledResult<WorkItem> => {
    const item = done.get(completion.id);
    if (item && !reported.has(completion.id)) {
      reported.add(completion.id);
      return { status: 'fulfilled', value: item };
    }
    if (!item && unserialisable.has(completion.id))
      return { status: 'rejected', reason: unserialisable.get(completion.id) };
    return {
      status: 'rejected',
      reason: refusal(completion.id, item ?? current.get(completion.id), 'completed', leasedStates, workerId),
    };
  });
  for (const item of done.values()) publishTerminal(ctx, item);
  for (const item of done.values()) {
    // A crash right here leaves the parent blocked; reapExpiredLeases repairs that.
    if (item.parentId)
      await withEffects(ctx, (tx, effects) => maybeUnblockParent(ctx, tx, item.parentId!, now, effects));
  }
  return results;
}

/** Marks one item completed. Exactly once: a worker whose lease lapsed gets `LEASE_EXPIRED`. */
export async function complete(
  ctx: QueueContext,
  id: string,
  workerId: string,
  result: WorkCompletion = {},
): Promise<WorkItem> {
  const [settled] = await completeMany(ctx, workerId, [{ ...result, id }]);
  if (settled!.status === 'rejected') throw settled!.reason;
  return settled!.value;
}
