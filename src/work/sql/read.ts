import type { SqlExecutor, SqlValue } from '../../store/index.js';
import { rowToWorkItem, type WorkItemRow } from '../rows.js';
import { terminalWorkStates, type WorkState, workStates } from '../states.js';
import type { WorkItem, WorkListFilter } from '../types.js';
import type { QueueContext } from './context.js';
import { inList } from './guards.js';

/** One item by id; `lock` takes a row lock on Postgres (inside a transaction). */
export async function selectById(
  ctx: QueueContext,
  exec: SqlExecutor,
  id: string,
  lock = false,
): Promise<WorkItem | undefined> {
  const row = await exec.get<WorkItemRow>(
    `SELECT * FROM work_items WHERE id = ?${lock && ctx.isPostgres ? ' FOR UPDATE' : ''}`,
    [id],
  );
  return row ? rowToWorkItem(row) : undefined;
}

/** The items that exist among `ids`, in the order asked. */
export async function getMany(ctx: QueueContext, ids: ReadonlyArray<string>): Promise<WorkItem[]> {
  if (ids.length === 0) return [];
  const rows = await ctx.db.all<WorkItemRow>(`SELECT * FROM work_items WHERE id IN (${inList(ids)})`, [
    ...ids,
  ]);
  const byId = new Map(rows.map((row) => [row.id, rowToWorkItem(row)]));
  return ids.flatMap((id) => byId.get(id) ?? []);
}

export async function list(ctx: QueueContext, filter: WorkListFilter = {}): Promise<WorkItem[]> {
  const clauses: string[] = [];
  const params: SqlValue[] = [];
  const add = (clause: string, ...values: SqlValue[]) => {
    clauses.push(clause);
    params.push(...values);
  };
  if (filter.states && filter.states.length > 0) {
    // Items never leave a terminal state, so those states only grow. SQLite keeps no statistics here and would
    // take the state index for any state, then sort every completed item; `+state` keeps it on the index by
    // creation (migration 0031), read newest first until the limit. The live states stay small.
    const byCreation = filter.order !== 'recently-resolved';
    const growing =
      byCreation && !ctx.isPostgres && filter.states.every((state) => terminalWorkStates.has(state));
    add(`${growing ? '+state' : 'state'} IN (${inList(filter.states)})`, ...filter.states);
  }
  if (filter.kind !== undefined) add('kind = ?', filter.kind);
  if (filter.kinds) add(filter.kinds.length ? `kind IN (${inList(filter.kinds)})` : '1 = 0', ...filter.kinds);
  if (filter.excludeKinds?.length)
    add(`kind NOT IN (${inList(filter.excludeKinds)})`, ...filter.excludeKinds);
  if (filter.agentId !== undefined) add('agent_id = ?', filter.agentId);
  if (filter.sessionKey !== undefined) add('session_key = ?', filter.sessionKey);
  if (filter.parentId !== undefined) add('parent_id = ?', filter.parentId);
  if (filter.speculative !== undefined) add('speculative = ?', filter.speculative ? 1 : 0);
  if (filter.resolvedSince !== undefined) add('resolved_at >= ?', filter.resolvedSince);
  if (filter.updatedBefore !== undefined) add('updated_at < ?', filter.updatedBefore);
  const order =
    filter.order === 'oldest'
      ? 'created_at ASC, id ASC'
      : filter.order === 'recently-resolved'
        ? 'resolved_at DESC, id DESC'
        : 'created_at DESC, id DESC';
  const limit = Math.min(Math.max(filter.limit ?? 100, 1), 10_000);
  const rows = await ctx.db.all<WorkItemRow>(
    `SELECT * FROM work_items${clauses.length ? ` WHERE ${clauses.join(' AND ')}` : ''} ORDER BY ${order} LIMIT ?`,
    [...params, limit],
  );
  return rows.map(rowToWorkItem);
}

/** Number of items per state (every state present, zero when none). */
export async function counts(
  ctx: QueueContext,
  filter: Pick<WorkListFilter, 'sessionKey' | 'agentId' | 'kind'> = {},
): Promise<Record<WorkState, number>> {
  const clauses: string[] = [];
  const params: SqlValue[] = [];
  if (filter.sessionKey !== undefined) {
    clauses.push('session_key = ?');
    params.push(filter.sessionKey);
  }
  if (filter.agentId !== undefined) {
    clauses.push('agent_id = ?');
    params.push(filter.agentId);
  }
  if (filter.kind !== undefined) {
    clauses.push('kind = ?');
    params.push(filter.kind);
  }
  const rows = await ctx.db.all<{ state: string; n: number }>(
    `SELECT state, COUNT(*) AS n FROM work_items${clauses.length ? ` WHERE ${clauses.join(' AND ')}` : ''} GROUP BY state`,
    params,
  );
  const result = Object.fromEntries(workStates.map((state) => [state, 0])) as Record<WorkState, number>;
  for (const row of rows) result[row.state as WorkState] = Number(row.n);
  return result;
}
