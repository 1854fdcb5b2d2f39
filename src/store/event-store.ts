import type { SqlDatabase, SqlExecutor, SqlValue } from './database.js';
import { sqlPlaceholders } from './placeholders.js';

/** An event as written to the audit log. */
export interface EventInput {
  type: string;
  /** Epoch milliseconds. */
  at: number;
  sessionKey?: string;
  agentId?: string;
  workItemId?: string;
  runId?: string;
  /** Plain JSON data. */
  data: unknown;
}

export interface StoredEvent extends EventInput {
  /** Increases with every append; use it as a cursor (`afterId`). */
  id: number;
}

export interface ListEventsOptions {
  types?: ReadonlyArray<string>;
  sessionKey?: string;
  agentId?: string;
  workItemId?: string;
  runId?: string;
  /** Only events with a larger id (exclusive cursor). */
  afterId?: number;
  /** Only events with a smaller id (exclusive cursor), for paging backwards with `order: 'desc'`. */
  beforeId?: number;
  /** By id; default ascending. */
  order?: 'asc' | 'desc';
  /** Default 100, at most 10,000. */
  limit?: number;
}

/** The append-only audit log of bus events. */
export interface EventStore {
  append(event: EventInput): Promise<number>;
  /** Appends in one transaction, keeping the given order; returns the ids. */
  appendMany(events: ReadonlyArray<EventInput>): Promise<number[]>;
  list(options?: ListEventsOptions): Promise<StoredEvent[]>;
  /**
   * One step of pruning the log by age (see `createEventRetention`): deletes the events written before
   * `before` (epoch ms) among the ids `fromId` to `fromId + maxRows` (exclusive), found by the primary key.
   * `nextFromId` is where the next step starts; undefined when the oldest event from `fromId` on is not older
   * than `before` (nothing was deleted).
   */
  deleteOlderThan(before: number, range: { fromId: number; maxRows: number }): Promise<DeletedEvents>;
}

export interface DeletedEvents {
  deleted: number;
  nextFromId: number | undefined;
}

interface EventRow {
  id: number;
  type: string;
  at: number;
  session_key: string | null;
  agent_id: string | null;
  work_item_id: string | null;
  run_id: string | null;
  data: string;
}

const columnsPerRow = 7;
// Well under SQLite's 32,766 and Postgres's 65,535 bind parameters per statement.
const rowsPerInsert = 500;
const maxListLimit = 10_000;

function toParams(event: EventInput): SqlValue[] {
  return [
    event.type,
    event.at,
    event.sessionKey ?? null,
    event.agentId ?? null,
    event.workItemId ?? null,
    event.runId ?? null,
    JSON.stringify(event.data ?? null),
  ];
}

function toStored(row: EventRow): StoredEvent {
  const event: StoredEvent = {
    id: Number(row.id),
    type: row.type,
    at: Number(row.at),
    data: JSON.parse(row.data),
  };
  if (row.session_key !== null) event.sessionKey = row.session_key;
  if (row.agent_id !== null) event.agentId = row.agent_id;
  if (row.work_item_id !== null) event.workItemId = row.work_item_id;
  if (row.run_id !== null) event.runId = row.run_id;
  return event;
}

const insertPrefix =
  'INSERT INTO events (type, at, session_key, agent_id, work_item_id, run_id, data) VALUES ';
const rowPlaceholders = `(${sqlPlaceholders(columnsPerRow)})`;

/**
 * The indexes of lookups by session key, work item and run, made by the first `list` that filters on their
 * column (migration 0030 dropped them): nothing in agentd lists the audit log, and keyed all over their
 * B-trees they made every row written cost about eight times as much. The indexes by type and by agent,
 * appended at their ends, are kept by the schema.
 */
const lookupIndexes = {
  session_key: 'events_by_session',
  work_item_id: 'events_by_work_item',
  run_id: 'events_by_run',
} as const;

type LookupColumn = keyof typeof lookupIndexes;

export function createEventStore(db: SqlDatabase): EventStore {
  const indexed = new Set<LookupColumn>();
  /**
   * Makes the column's index once per store. The first list over a large log waits for it to be built (on
   * SQLite, on the event loop). A failure (a full disk, a read-only store, another process making the same
   * index at the same moment on Postgres) leaves the list to scan, and the next one tries again.
   */
  const indexFor = async (column: LookupColumn): Promise<void> => {
    if (indexed.has(column)) return;
    try {
      await db.run(
        `CREATE INDEX IF NOT EXISTS ${lookupIndexes[column]} ON events (${column}, id) WHERE ${column} IS NOT NULL`,
      );
      indexed.add(column);
    } catch {
      // The list below answers all the same, by a scan.
    }
  };
  return {
    async append(event) {
      const row = await db.get<{ id: number }>(
        `${insertPrefix}${rowPlaceholders} RETURNING id`,
        toParams(event),
      );
      return Number(row!.id);
    },

    async appendMany(events) {
      if (events.length === 0) return [];
      const insertChunk = async (executor: SqlExecutor, chunk: ReadonlyArray<EventInput>) => {
        const values = `${insertPrefix}${chunk.map(() => rowPlaceholders).join(', ')}`;
        const params = chunk.flatMap(toParams);
        if (db.dialect === 'sqlite') {
          // The rows of one INSERT get consecutive ids in VALUES order (AUTOINCREMENT, the writer's lock held):
          // the last names them all. RETURNING's rows cost about a quarter of the statement (the audit log's
          // batches run on the event loop between chat turns).
          const { lastInsertRowid } = await executor.run(values, params);
          const first = lastInsertRowid! - chunk.length + 1;
          return chunk.map((_, index) => first + index);
        }
        const rows = await executor.all<{ id: number }>(`${values} RETURNING id`, params);
        // RETURNING order is not guaranteed by SQL; ids are assigned in VALUES order, so sort them.
        return rows.map((row) => Number(row.id)).sort((left, right) => left - right);
      };
      // One statement is atomic by itself: no BEGIN and COMMIT round trips on Postgres.
      if (events.length <= rowsPerInsert) return insertChunk(db, events);
      return db.transaction(async (tx) => {
        const ids: number[] = [];
        for (let start = 0; start < events.length; start += rowsPerInsert)
          ids.push(...(await insertChunk(tx, events.slice(start, start + rowsPerInsert))));
        return ids;
      });
    },

    async list(options = {}) {
      const conditions: string[] = [];
      const params: SqlValue[] = [];
      if (options.types && options.types.length > 0) {
        conditions.push(`type IN (${sqlPlaceholders(options.types.length)})`);
        params.push(...options.types);
      }
      const lookups: LookupColumn[] = [];
      const equal = (column: 'agent_id' | LookupColumn, value: string | undefined) => {
        if (value === undefined) return;
        conditions.push(`${column} = ?`);
        params.push(value);
        if (column !== 'agent_id') lookups.push(column);
      };
      equal('session_key', options.sessionKey);
      equal('agent_id', options.agentId);
      equal('work_item_id', options.workItemId);
      equal('run_id', options.runId);
      for (const column of lookups) await indexFor(column);
      if (options.afterId !== undefined) {
        conditions.push('id > ?');
        params.push(options.afterId);
      }
      if (options.beforeId !== undefined) {
        conditions.push('id < ?');
        params.push(options.beforeId);
      }
      const limit = Math.min(Math.max(1, Math.floor(options.limit ?? 100)), maxListLimit);
      const where = conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
      const order = options.order === 'desc' ? 'DESC' : 'ASC';
      const rows = await db.all<EventRow>(
        `SELECT id, type, at, session_key, agent_id, work_item_id, run_id, data FROM events ${where} ORDER BY id ${order} LIMIT ?`,
        [...params, limit],
      );
      return rows.map(toStored);
    },

    async deleteOlderThan(before, { fromId, maxRows }) {
      // `events` has no index by `at`: ids increase with time, so the oldest row says whether there is
      // anything to delete, and a range of ids bounds the rows one statement deletes and scans.
      const oldest = await db.get<{ id: number; at: number }>(
        'SELECT id, at FROM events WHERE id >= ? ORDER BY id LIMIT 1',
        [fromId],
      );
      if (!oldest || Number(oldest.at) >= before) return { deleted: 0, nextFromId: undefined };
      const start = Number(oldest.id);
      const end = start + maxRows;
      // The range that reaches the cutoff holds newer rows too: they stay.
      const { changes } = await db.run('DELETE FROM events WHERE id >= ? AND id < ? AND at < ?', [
        start,
        end,
        before,
      ]);
      return { deleted: changes, nextFromId: end };
    },
  };
}
