import type { ModelMessage } from '../model/index.js';
import {
  type SqlDatabase,
  type SqlExecutor,
  type SqlValue,
  sqlPlaceholders,
  type TransactionExecutor,
  type TransactionOptions,
} from '../store/index.js';
import { ErrorCodes, isStoreUnavailable, SystemError } from '../util/index.js';
import { forEachIndexTerm, isPlainToken, porterStem } from './porter.js';
import { ftsAnyOf, ftsPhrase, tsqueryAnyOf, tsqueryPhrase } from './text.js';
import type { MemoryEntry, MemoryKind, MemoryRole, MemoryState, MessageMark, SessionRef } from './types.js';
import { readVocabulary } from './vocabulary-reader.js';

/** An entry as kept in RAM and in the database: the public entry plus its position and row id. */
export interface StoredEntry extends MemoryEntry {
  /** Context position: a summary and the tombstones of what it replaced sit where the originals were. */
  orderKey: number;
  /** Row id in `memory_entries` (undefined for entries not persisted in RAM-only mode). */
  rowId: number | undefined;
  /**
   * RAM only: how many leases of chosen entries hold this one; a held entry is neither evicted nor
   * summarized. A lease of the whole context (a chat turn's) holds its entries by a mark on the RAM context
   * instead (`RamSession.contextPins`).
   */
  pins?: number;
  /** RAM only: the frozen copy pins hand out, made at the entry's first pin (see `pinnedView`). */
  pinnedView?: Readonly<MemoryEntry>;
  /** RAM only: the entry as a frozen model message, made when a lease's conversation first includes it. */
  modelMessage?: Readonly<ModelMessage>;
}

export interface EntryRow {
  id: number;
  session_key: string;
  memory_id: number;
  session_id: string;
  agent_id: string;
  kind: string;
  role: string;
  state: string;
  related_to: number | null;
  order_key: number;
  content: string;
  tool_data: string | null;
  metadata: string | null;
  tokens: number;
  created_at_ms: number;
  updated_at_ms: number;
  archived_at_ms: number | null;
}

const entryColumns =
  'e.id, e.session_key, e.memory_id, e.session_id, e.agent_id, e.kind, e.role, e.state, e.related_to, e.order_key, ' +
  'e.content, e.tool_data, e.metadata, e.tokens, e.created_at_ms, e.updated_at_ms, e.archived_at_ms';

function parseJsonObject(text: string | null): Record<string, unknown> | undefined {
  if (!text) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

export function rowToEntry(row: EntryRow): StoredEntry {
  const toolData = parseJsonObject(row.tool_data);
  const metadata = parseJsonObject(row.metadata);
  const memoryId = Number(row.memory_id);
  const entry: StoredEntry = {
    memoryId,
    address: `${row.session_key}#${memoryId}`,
    sessionId: row.session_id,
    sessionKey: row.session_key,
    agentId: row.agent_id,
    kind: row.kind as MemoryKind,
    role: row.role as MemoryRole,
    state: row.state as MemoryState,
    content: row.content,
    relatedTo: row.related_to === null ? null : Number(row.related_to),
    tokens: Number(row.tokens),
    createdAtMs: Number(row.created_at_ms),
    archivedAtMs: row.archived_at_ms === null ? null : Number(row.archived_at_ms),
    orderKey: Number(row.order_key),
    rowId: Number(row.id),
  };
  if (metadata) entry.metadata = metadata;
  if (entry.kind === 'summary' && Array.isArray(metadata?.sourceIds))
    entry.sourceIds = metadata.sourceIds.map(Number);
  if (toolData) {
    if (Array.isArray(toolData.toolCalls)) entry.toolCalls = toolData.toolCalls as MemoryEntry['toolCalls'];
    if (typeof toolData.toolCallId === 'string') entry.toolCallId = toolData.toolCallId;
    if (typeof toolData.toolName === 'string') entry.toolName = toolData.toolName;
    if (typeof toolData.isError === 'boolean') entry.isError = toolData.isError;
  }
  return entry;
}

function toolDataOf(entry: MemoryEntry): string | null {
  if (entry.toolCalls?.length) return JSON.stringify({ toolCalls: entry.toolCalls });
  if (entry.toolCallId !== undefined) {
    // What JSON.stringify made of `{ toolCallId, toolName, isError }`, written out: stringifying a new object
    // for every tool result cost about twice as much.
    const name = entry.toolName === undefined ? '' : `,"toolName":${JSON.stringify(entry.toolName)}`;
    return `{"toolCallId":${JSON.stringify(entry.toolCallId)}${name},"isError":${entry.isError ?? false}}`;
  }
  return null;
}

/** `(session = ? AND memory_id IN (…)) OR …` for a list of addresses, grouped by session. */
function addressesSql(
  ids: ReadonlyArray<{ sessionKey: string; memoryId: number }>,
  params: SqlValue[],
): string {
  const byKey = new Map<string, number[]>();
  for (const id of ids) byKey.set(id.sessionKey, [...(byKey.get(id.sessionKey) ?? []), id.memoryId]);
  const groups: string[] = [];
  for (const [key, memoryIds] of byKey) {
    groups.push(`(e.session_key = ? AND e.memory_id IN (${sqlPlaceholders(memoryIds.length)}))`);
    params.push(key, ...memoryIds);
  }
  return `(${groups.join(' OR ')})`;
}

export interface EntryFilter {
  agentId: string;
  sessionKey?: string;
  includeArchived: boolean;
  kind?: MemoryKind;
  states?: ReadonlyArray<MemoryState>;
  /** Only archived rows. */
  archivedOnly?: boolean;
}

/** The WHERE clauses of `filter` over `memory_entries e`, the agent's clause written as `agentTest`. */
function filterSql(filter: EntryFilter, params: SqlValue[], agentTest: string): string {
  const clauses = [agentTest];
  params.push(filter.agentId);
  if (filter.sessionKey !== undefined) {
    clauses.push('e.session_key = ?');
    params.push(filter.sessionKey);
  }
  if (filter.archivedOnly) clauses.push('e.archived_at_ms IS NOT NULL');
  else if (!filter.includeArchived) clauses.push('e.archived_at_ms IS NULL');
  if (filter.kind) {
    clauses.push('e.kind = ?');
    params.push(filter.kind);
    // Literal, so the planners can use the summaries' partial index (migration 0024).
    if (filter.kind !== 'entry') clauses.push("e.kind <> 'entry'");
  }
  if (filter.states?.length) {
    clauses.push(`e.state IN (${sqlPlaceholders(filter.states.length)})`);
    params.push(...filter.states);
  }
  return clauses.join(' AND ');
}

/** Weight of a match in the two previous conversational turns, relative to the entry's own words. */
export interface ContextWeights {
  before: number;
}

export interface RankedRow extends EntryRow {
  rank: number;
}

/**
 * An entry as automatic recall lists it: its address, one line of the prompt and whether it is in a
 * context, without the JSON columns a full entry decodes. Every column a statement returns costs a property
 * on each row object (about 0.2 µs), so kind and role come as the one word the line shows.
 */
export interface RecallLine {
  sessionKey: string;
  memoryId: number;
  content: string;
  createdAtMs: number;
  /** Who the line is from: "summary" for a summary, else the entry's role. */
  speaker: string;
  /** Active and unarchived: in its session's context, or in what that context loads once the session does. */
  storedInContext: boolean;
}

/** A recall line read by row id, with what automatic recall's newest-matches path filters on. */
export interface RowLine extends RecallLine {
  rowId: number;
  agentId: string;
}

export interface RankedLine extends RecallLine {
  /** Higher is better. */
  rank: number;
  /** A user or assistant entry that is no tombstone: a conversational turn, which neighbour smoothing spreads. */
  turn: boolean;
}

const speakerColumn = "CASE WHEN e.kind = 'summary' THEN 'summary' ELSE e.role END AS speaker";
const lineColumns = `e.session_key, e.memory_id, e.content, e.created_at_ms, ${speakerColumn}`;
const turnTest = "e.kind = 'entry' AND e.role IN ('user', 'assistant') AND e.state <> 'tombstone'";
const storedInContextTest = "e.state = 'active' AND e.archived_at_ms IS NULL";
/** A session instance's entries: its key's MemoryIDs from a bound (`InstanceIdRange`). Parameters: key, bound, id. */
const instanceRangeTest = 'session_key = ? AND memory_id >= ? AND session_id = ?';
const rankedLineColumns = `${lineColumns}, (${turnTest}) AS turn, (${storedInContextTest}) AS stored_in_context`;
/** An entry's searchable words on Postgres: the expression of the GIN index of migration 0015, so the planner uses it. */
const pgWords = '(e.search_vector || e.context_before)';

/**
 * A recall line and its rank, built as one object: every line has one shape (a neighbour's rank is 0), so
 * the code reading them stays monomorphic, and no line is spread into another object. SQLite answers the
 * tests as 0 or 1, Postgres as booleans.
 */
function rowToLine(
  row: Record<string, unknown>,
  rank: number,
  turn: unknown,
  storedInContext: unknown,
): RankedLine {
  return {
    sessionKey: String(row.session_key),
    memoryId: Number(row.memory_id),
    content: String(row.content),
    createdAtMs: Number(row.created_at_ms),
    speaker: String(row.speaker),
    storedInContext: Boolean(storedInContext),
    rank,
    turn: Boolean(turn),
  };
}

export interface SnapshotRow {
  id: string;
  sessionId: string;
  sessionKey: string;
  agentId: string;
  reason: string;
  nextId: number;
  entryCount: number;
  summaryCount: number;
  tombstoneCount: number;
  activeTokens: number;
  activeIds: number[];
  createdAtMs: number;
}

export interface MemoryEventRow {
  id: string;
  sessionId: string;
  sessionKey: string;
  agentId: string;
  kind: string;
  count: number;
  tokensBefore: number;
  tokensAfter: number;
  memoryIds: number[];
  message: string;
  details?: Record<string, unknown>;
  createdAtMs: number;
}

/** Entries of a key that a commit moves out of the context (evicted, summarized) and the event saying so. */
export interface Retirement {
  memoryIds: ReadonlyArray<number>;
  state: MemoryState;
  nowMs: number;
  event: MemoryEventRow;
}

/**
 * Where a session instance's entries are in its key's MemoryIDs (`memory_sessions`, migration 0032). MemoryIDs
 * grow per key and an entry leaves the active state only for good, so the instance's entries are found through
 * the key's unique (session_key, memory_id) index from these ids, filtered by the instance: no index of their
 * own, which every insert and eviction would write.
 */
export interface InstanceIdRange {
  /** At or below every id the instance wrote. */
  firstId: number;
  /** At or below the id of every entry of the instance that is active. */
  liveFromId: number;
}

/** The range a commit records: without `liveFromId` (RAM does not know the stored entries) it keeps the stored one. */
export interface TouchedIdRange {
  firstId: number;
  liveFromId: number | null;
}

const insertEventSql =
  'INSERT INTO memory_events (id, session_id, session_key, agent_id, kind, count, tokens_before, tokens_after, memory_ids, ' +
  'message, details, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)';

function eventParams(event: MemoryEventRow): SqlValue[] {
  return [
    ...sessionLogHeadValues(event),
    event.kind,
    event.count,
    event.tokensBefore,
    event.tokensAfter,
    JSON.stringify(event.memoryIds),
    event.message,
    event.details ? JSON.stringify(event.details) : null,
    event.createdAtMs,
  ];
}

function setStatesSql(count: number): string {
  return `UPDATE memory_entries SET state = ?, updated_at_ms = ? WHERE session_key = ? AND memory_id IN (${sqlPlaceholders(count)})`;
}

/**
 * Snapshots and events are per-session logs: both tables start with these identifying columns and are
 * listed newest first, so they share the code that writes and reads those columns.
 */
type SessionLogTable = 'memory_snapshots' | 'memory_events';

interface SessionLogHead {
  id: string;
  sessionId: string;
  sessionKey: string;
  agentId: string;
}

function sessionLogHeadValues(head: SessionLogHead): SqlValue[] {
  return [head.id, head.sessionId, head.sessionKey, head.agentId];
}

function sessionLogHeadOf(row: Record<string, unknown>): SessionLogHead {
  return {
    id: String(row.id),
    sessionId: String(row.session_id),
    sessionKey: String(row.session_key),
    agentId: String(row.agent_id),
  };
}

/** Float32 vectors travel as little-endian bytes on SQLite and as `real[]` literals on Postgres. */
function vectorParam(dialect: 'sqlite' | 'postgres', vector: Float32Array): SqlValue {
  if (dialect === 'sqlite') return new Uint8Array(vector.buffer, vector.byteOffset, vector.byteLength);
  return `{${Array.from(vector, (value) => (Number.isFinite(value) ? value : 0)).join(',')}}`;
}

function vectorFromBlob(value: unknown): Float32Array | undefined {
  if (!(value instanceof Uint8Array) || value.byteLength % 4 !== 0) return undefined;
  const copy = new Uint8Array(value.byteLength);
  copy.set(value);
  return new Float32Array(copy.buffer);
}

/**
 * All SQL of the memory subsystem. Portable SQL where the dialects agree; full-text search and vectors
 * branch on the dialect (FTS5 + bm25 on SQLite, tsvector + ts_rank on Postgres; sqlite-vec's
 * `vec_distance_cosine` or JS on SQLite, `unnest` over `real[]` on Postgres).
 */
const insertEntryPrefix =
  'INSERT INTO memory_entries (session_key, memory_id, session_id, agent_id, kind, role, state, related_to, order_key, ' +
  'content, tool_data, metadata, tokens, created_at_ms, updated_at_ms, archived_at_ms) VALUES ';
const entryPlaceholders = '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)';
/** 16 parameters a row: far below SQLite's 32,766 and Postgres's 65,535 per statement. */
const entriesPerInsert = 500;

/**
 * Whether the committed entries with row ids from `fromRowId` to `toRowId`, not yet in the SQLite full-text
 * index, may stay out of it for one read because none could be among its answers (automatic recall: the
 * asking session's own context). The read then does not index them first; the timer that follows every
 * insert does.
 */
export type UnindexedRowsTest = (fromRowId: number, toRowId: number) => boolean;

/** Terms of the SQLite full-text index (FTS5's stems) with the rows holding each, counted up to the index mark `upTo`. */
interface IndexVocabulary {
  counts: Map<string, number>;
  upTo: number;
}

/** The entries past the full-text index's mark, each as the view of migration 0028 defines its index row. */
export const indexPendingSql =
  'INSERT INTO memory_fts (rowid, content, before) SELECT id, content, before FROM memory_fts_rows ' +
  "WHERE id > (SELECT up_to FROM memory_fts_indexed WHERE id = 1) AND state <> 'tombstone' ORDER BY id";
/** The full-text index's mark: every entry up to it is indexed. */
const indexMarkSql = 'SELECT up_to FROM memory_fts_indexed WHERE id = 1';
/**
 * The text of each entry `indexPendingSql` indexes, as the index takes it (its words and the turns before it),
 * for the index vocabulary (`vocabulary` in the store).
 */
const pendingIndexTextsSql =
  "SELECT content || char(10) || coalesce(before, '') AS text FROM memory_fts_rows " +
  "WHERE id > (SELECT up_to FROM memory_fts_indexed WHERE id = 1) AND state <> 'tombstone'";
/** Moves the full-text index's mark past every entry, in the transaction of `indexPendingSql`. */
export const moveIndexMarkSql =
  'UPDATE memory_fts_indexed SET up_to = max(up_to, (SELECT coalesce(max(id), 0) FROM memory_entries)) WHERE id = 1 RETURNING up_to';
/**
 * How soon after an insert the full-text index takes the new rows when no search asks for them first. The
 * batch runs on the event loop: its rows are a pause for the turn that arrives meanwhile (100 ms of one
 * client's turns took 1.1 ms), and each batch is a segment the background merge folds in later.
 */
export const indexDelayMs = 20;
/** Rows a store inserts before the commit that passes this many indexes them itself. */
const maxUnindexedRows = 2_000;
/** Taken at load: a test's fake timers must not hold back the index under it. */
const indexLater = globalThis.setTimeout;

/**
 * The INSERT … RETURNING of `rows` entries, built once per row count: the same string each time is found in
 * the SQLite statement cache without hashing kilobytes of text again (a run's transcript and its eviction
 * are 82 rows, 4 KB of SQL).
 */
const insertEntriesSqls = new Map<number, string>();
const insertForms = { returning: 0, plain: 1, checked: 2 } as const;
/**
 * The INSERT of `rows` entries: `returning` (Postgres) returns each row's id and memory id, `checked` (SQLite)
 * checks the first row's id with `checkedSqliteEntryPlaceholders`.
 */
function insertEntriesSql(rows: number, form: keyof typeof insertForms): string {
  const key = rows * 3 + insertForms[form];
  let sql = insertEntriesSqls.get(key);
  if (sql === undefined) {
    const values = new Array(rows).fill(entryPlaceholders);
    if (form === 'checked') values[0] = checkedSqliteEntryPlaceholders;
    sql = `${insertEntryPrefix}${values.join(', ')}${form === 'returning' ? ' RETURNING id, memory_id' : ''}`;
    if (insertEntriesSqls.size >= 64) insertEntriesSqls.delete(insertEntriesSqls.keys().next().value!);
    insertEntriesSqls.set(key, sql);
  }
  return sql;
}

/**
 * Sets each entry's `rowId` from its INSERT's RETURNING rows, matched by memory id (unique within the key);
 * the highest row id returned.
 */
function setRowIds(
  entries: ReadonlyArray<StoredEntry>,
  rows: ReadonlyArray<{ id: number; memory_id: number }>,
): number {
  // RETURNING order is not guaranteed by SQL.
  const rowIds = new Map<number, number>();
  let highest = 0;
  for (const row of rows) {
    const id = Number(row.id);
    rowIds.set(Number(row.memory_id), id);
    if (id > highest) highest = id;
  }
  for (const entry of entries) entry.rowId = rowIds.get(entry.memoryId);
  return highest;
}

/**
 * A data-modifying statement (an INSERT, UPDATE or DELETE without RETURNING, `?` placeholders) that
 * `insertReserved` folds into the entries' INSERT on Postgres as a CTE of its own: it runs exactly once, in the
 * same statement, and so commits or fails with the entries. It sees the database as the statement began
 * (not the entries' rows), and no two statements of one INSERT may change the same row.
 */
export interface FoldedStatement {
  sql: string;
  params: ReadonlyArray<SqlValue>;
}

/**
 * A commit's entries were built with ids from a number the key's counter had already passed: another
 * writer of the key (another agentd on the database) took those ids. The transaction must be rolled back
 * (on Postgres it already failed) and the commit built again with the ids the counter gives.
 */
export class MemoryIdsTakenError extends SystemError {
  constructor(sessionKey: string, firstId: number) {
    super({
      code: ErrorCodes.conflict,
      message: `memory ids #${firstId}… of ${sessionKey} were taken meanwhile`,
      retryable: true,
    });
  }
}

/**
 * The counter's reservation as a data-modifying CTE of the entries' INSERT (Postgres): `count` ids from
 * `atLeast` on, or from the counter when it is further. Parameters: key, atLeast + count, atLeast, atLeast,
 * count.
 */
const reservingCte =
  'WITH reserved AS (INSERT INTO memory_counters (session_key, next_id) VALUES (?, ?) ON CONFLICT (session_key) ' +
  'DO UPDATE SET next_id = CASE WHEN memory_counters.next_id >= ? THEN memory_counters.next_id ELSE ? END + ? ' +
  'RETURNING next_id)';
/**
 * The first row's memory_id is NULL unless the reservation ended where the entries' ids do (parameter 2,
 * the counter's expected value; parameter 3, the id): the NOT NULL constraint then fails the statement, so
 * the transaction cannot commit entries whose ids another writer took, even with COMMIT already sent.
 */
const checkedEntryPlaceholders =
  '(?, (SELECT CASE WHEN next_id = ? THEN ?::bigint END FROM reserved), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)';

/**
 * The next free MemoryID of a key: past every id its entries hold and past its counter, which holds the ids
 * of deleted entries (see `keepIdsOf`). `greatest` is the dialect's two-argument maximum. Parameters: key,
 * key.
 */
const nextFreeIdOf = (greatest: 'GREATEST' | 'max') =>
  `${greatest}(coalesce((SELECT next_id FROM memory_counters WHERE session_key = ?), 1), ` +
  'coalesce((SELECT max(memory_id) + 1 FROM memory_entries WHERE session_key = ?), 1))';

/**
 * SQLite's form of the same check, made by the entries' INSERT itself instead of a read before it: the first
 * row's memory_id is NULL unless the key's next free id (read under the write lock the transaction holds) is
 * not past the id the row was built with. The row's expressions are evaluated before it is inserted, so the
 * check sees none of the statement's own rows. Parameters: key, key, id, id.
 */
const checkedSqliteEntryPlaceholders = `(?, (SELECT CASE WHEN ${nextFreeIdOf('max')} <= ? THEN ? END), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/** The NOT NULL violation `checkedEntryPlaceholders` or `checkedSqliteEntryPlaceholders` raises when the ids were taken. */
function isIdsTakenViolation(error: unknown): boolean {
  const { code, column, message } = error as { code?: unknown; column?: unknown; message?: unknown };
  if (code === 'SQLITE_CONSTRAINT_NOTNULL')
    return typeof message === 'string' && message.endsWith('memory_entries.memory_id');
  return code === '23502' && column === 'memory_id';
}

/**
 * The parameters of `entries`' rows, 16 a row, in one array filled in place: `flatMap` over an array per row
 * took about 4 µs a row (350 µs for a run's 41 entries and their 41 tombstones), this about 0.7.
 */
function entriesParams(entries: ReadonlyArray<StoredEntry>): SqlValue[] {
  const params = new Array<SqlValue>(entries.length * 16);
  let at = 0;
  for (const entry of entries) {
    params[at++] = entry.sessionKey;
    params[at++] = entry.memoryId;
    params[at++] = entry.sessionId;
    params[at++] = entry.agentId;
    params[at++] = entry.kind;
    params[at++] = entry.role;
    params[at++] = entry.state;
    params[at++] = entry.relatedTo;
    params[at++] = entry.orderKey;
    params[at++] = entry.content;
    params[at++] = toolDataOf(entry);
    params[at++] = entry.metadata ? JSON.stringify(entry.metadata) : null;
    params[at++] = entry.tokens;
    params[at++] = entry.createdAtMs;
    params[at++] = entry.createdAtMs;
    params[at++] = entry.archivedAtMs;
  }
  return params;
}

export function createLtmStore(
  db: SqlDatabase,
  options: {
    sqliteVec: boolean;
    /** Terms above which the index vocabulary is not kept (see `vocabulary`; default 100,000). */
    maxVocabularyTerms?: number;
  },
) {
  const dialect = db.dialect;
  /**
   * The agent's clause of a statement that reads the agent's entries as such: a list by agent, the scan of its
   * vectors. A list of summaries reads their partial index by agent; entries have none (migration 0034).
   */
  const byAgentTest = 'e.agent_id = ?';
  /**
   * The agent's clause of every other statement, which finds its rows by row id, FTS5 candidate, address or
   * session key. agentd keeps no planner statistics, and without them SQLite took the agent's index (until
   * migration 0034) for any `agent_id = ?`, then tested every entry of the agent (all of them in a one-agent
   * store: 8.7 ms for a ranking query's candidates and 7.8 ms for 6 addresses at 100,000 entries, 0.17 and
   * 0.01 ms with the unary `+`, which no index serves). The `+` still matters: with a filter by a kind other
   * than 'entry', a plain test lets the summaries' partial index by agent (0024) into the addressed reads and
   * the ranking queries, which then walk every summary of the agent. Postgres plans from the statistics its
   * autovacuum keeps.
   */
  const agentTest = dialect === 'sqlite' ? '+e.agent_id = ?' : byAgentTest;
  const newestSessionLogRows = (table: SessionLogTable, sessionKey: string, limit: number) =>
    db.all<Record<string, unknown>>(
      `SELECT * FROM ${table} WHERE session_key = ? ORDER BY created_at_ms DESC, id DESC LIMIT ?`,
      [sessionKey, limit],
    );

  /**
   * The highest entry row id: the highest read at most `highestRowIdMaxAgeMs` ago, or of the rows this store
   * inserted since, whichever is higher. It tells whether a search is under its row budget at all, when a
   * cached term count is stale (growth by a tenth) and when to merge the index (doubling); reading it
   * for every search was a statement of its own (4–25 µs, a tenth of an automatic recall), and reading it
   * again after each of the store's own inserts made it one in every chat turn (15 µs on SQLite, a round trip
   * on Postgres) for an id the insert had just given. Another process's inserts are seen within the age. An
   * insert that rolls back leaves it too high until new rows pass it, which only makes its uses more careful:
   * a term recounted sooner, a kept lookup checked against rows that are not there.
   */
  let highestRowIdRead: { id: number; atMs: number } | undefined;
  let highestRowIdInserted = 0;
  const highestRowIdMaxAgeMs = 1_000;

  const highestEntryRowId = async (): Promise<number> => {
    const now = performance.now();
    const read = highestRowIdRead;
    if (read !== undefined && now - read.atMs < highestRowIdMaxAgeMs)
      return Math.max(read.id, highestRowIdInserted);
    const row = await db.get<{ id: number | null }>('SELECT max(id) AS id FROM memory_entries');
    const id = Number(row?.id ?? 0);
    highestRowIdRead = { id, atMs: now };
    return Math.max(id, highestRowIdInserted);
  };
  const noteInsertedRowId = (rowId: number) => {
    if (rowId > highestRowIdInserted) highestRowIdInserted = rowId;
  };

  /**
   * The SQLite full-text index is written in batches (migration 0027): the rows past the mark in
   * `memory_fts_indexed`, with the two turns before each as the insert trigger gave them, in one statement,
   * and the mark moved, in one transaction. FTS5 turns each transaction's rows into a segment when it
   * commits; one segment for a batch of turns costs far less than one for each of a turn's two commits.
   * Every read of the index brings it up to date first (`indexPending`), so a search finds every entry
   * committed before it; a timer does it `indexDelayMs` after an insert, so the index is also up to date on
   * disk for other processes. SQLite serialises writers, so no uncommitted row can hide below the mark.
   * Another process's rows are seen through `highestEntryRowId`, within its age; this store's own raise it
   * past the mark as they are inserted.
   */
  let indexedUpTo: number | undefined;
  let indexTimer: ReturnType<typeof setTimeout> | undefined;
  /** Rows this store inserted since it last indexed: a loop that writes without yielding to timers. */
  let unindexedRows = 0;
  /** Indexes the rows past the mark and moves it, in `tx`; the mark after it. */
  const indexBatch = async (tx: SqlExecutor): Promise<number> => {
    unindexedRows = 0;
    const counted = await vocabularyBeforeBatch(tx);
    await tx.run(indexPendingSql);
    const upTo = Number((await tx.get<{ up_to: number }>(moveIndexMarkSql))?.up_to ?? 0);
    vocabularyAfterBatch(counted, upTo);
    return upTo;
  };
  const indexPending = async (): Promise<void> => {
    if (dialect !== 'sqlite') return;
    if (indexedUpTo !== undefined && (await highestEntryRowId()) <= indexedUpTo) return;
    // Inserts made meanwhile that commit after the batch have higher row ids: the next read indexes them.
    indexedUpTo = await db.transaction(indexBatch, { ambient: false });
  };
  /**
   * `indexPending` before a read of the index, unless the read may leave every row past the mark out
   * (`unindexedOk`: automatic recall, when they are all its own context's). A store that cannot be written (a
   * full disk) refuses the batch: the read answers from the index as it is, without the newest entries, and
   * the next one tries again, rather than a full disk failing every search.
   */
  const indexBeforeRead = async (unindexedOk?: UnindexedRowsTest): Promise<void> => {
    if (unindexedOk !== undefined && indexedUpTo !== undefined) {
      const highest = await highestEntryRowId();
      if (highest > indexedUpTo && unindexedOk(indexedUpTo + 1, highest)) return;
    }
    try {
      await indexPending();
    } catch (error) {
      if (!isStoreUnavailable(error)) throw error;
    }
  };
  /**
   * Deletions of entries by this store (`deleteEntries`), and with them of their rows of the full-text index
   * (the delete trigger), counted as each starts: a kept lookup may not name a row deleted since it was made.
   * A statement that changed an entry's content would re-index it (the update trigger) and must count too;
   * none does, content being written once.
   */
  let indexDeletions = 0;

  /**
   * Automatic recall's first lookup of a term's newest matches, kept by term (SQLite): a conversation's own
   * recurring word ("say", a project's name) is looked up again on every turn, and FTS5 reads the term's
   * whole doclist each time (100–110 µs inside a turn at 100,000 entries, a third of the recall). A kept
   * lookup answers a new one while it names the rows a new one would, apart from rows the caller passes over
   * anyway: no other connection has committed since (`readVersion`, SQLite's `data_version`), this store has
   * deleted nothing from the index, and every row past the index mark it was read at is one the caller's
   * `unindexedOk` lets a read leave out (the asking context's own). It keeps twice the rows asked, so a
   * context that grows by a turn's rows still fits.
   */
  const newestLookups = new Map<
    string,
    { rowIds: number[]; fetched: number; version: number; deletions: number; upTo: number }
  >();
  const maxNewestLookups = 256;

  const keptNewestLookup = (
    term: string,
    limit: number,
    unindexedOk: UnindexedRowsTest,
    version: number,
    highestRowId: number,
  ): number[] | undefined => {
    const kept = newestLookups.get(term);
    if (kept === undefined || kept.deletions !== indexDeletions || kept.version !== version) return undefined;
    if (limit > kept.fetched && kept.rowIds.length === kept.fetched) return undefined;
    if (highestRowId > kept.upTo && !unindexedOk(kept.upTo + 1, highestRowId)) return undefined;
    return kept.rowIds.slice(0, limit);
  };

  const indexSoon = () => {
    if (dialect !== 'sqlite' || indexTimer !== undefined) return;
    indexTimer = indexLater(() => {
      indexTimer = undefined;
      // A failure here (a full disk, a closed store) leaves the rows to the next read, which tries again.
      indexPending().catch(() => undefined);
    }, indexDelayMs);
    indexTimer.unref?.();
  };

  /**
   * Inserts entries of one session key in one statement per `entriesPerInsert` (a turn's reply and the
   * tombstones of what it evicted are one round trip on Postgres, not one each) and sets their `rowId`.
   * Row triggers see the rows inserted before theirs in the same statement on both dialects, so each
   * entry's search context is what one insert per entry gave it. With `checkIdsOf` (SQLite: the entries'
   * session key) the first row checks its id (`checkedSqliteEntryPlaceholders`), and ids another writer took
   * fail the insert with MemoryIdsTakenError.
   */
  const insertEntries = async (
    tx: SqlExecutor,
    entries: ReadonlyArray<StoredEntry>,
    checkIdsOf?: string,
  ): Promise<void> => {
    for (let start = 0; start < entries.length; start += entriesPerInsert) {
      const chunk = entries.slice(start, start + entriesPerInsert);
      if (dialect === 'sqlite') {
        const params = entriesParams(chunk);
        const checked = start === 0 && checkIdsOf !== undefined;
        if (checked) {
          const firstId = chunk[0]!.memoryId;
          params.splice(1, 1, checkIdsOf, checkIdsOf, firstId, firstId);
        }
        // AUTOINCREMENT gives the rows of one INSERT consecutive ids in VALUES order: the last one names them
        // all, with no RETURNING rows to build and read back.
        let lastInsertRowid: number | undefined;
        try {
          ({ lastInsertRowid } = await tx.run(
            insertEntriesSql(chunk.length, checked ? 'checked' : 'plain'),
            params,
          ));
        } catch (error) {
          if (checked && isIdsTakenViolation(error))
            throw new MemoryIdsTakenError(checkIdsOf, chunk[0]!.memoryId);
          throw error;
        }
        const firstRowId = lastInsertRowid! - chunk.length + 1;
        for (let index = 0; index < chunk.length; index++) chunk[index]!.rowId = firstRowId + index;
        noteInsertedRowId(lastInsertRowid!);
      } else {
        const rows = await tx.all<{ id: number; memory_id: number }>(
          insertEntriesSql(chunk.length, 'returning'),
          entriesParams(chunk),
        );
        noteInsertedRowId(setRowIds(chunk, rows));
      }
      unindexedRows += chunk.length;
    }
    // A bulk load that never lets the timer run is indexed as it goes, in bounded batches, not all at once
    // by the first search after it.
    if (dialect === 'sqlite' && unindexedRows >= maxUnindexedRows) await indexBatch(tx);
    else indexSoon();
  };

  const nextFreeIdSql = `SELECT ${nextFreeIdOf(dialect === 'postgres' ? 'GREATEST' : 'max')} AS next_id`;

  /**
   * Before entries of a key are deleted, the counter keeps the key's ids, so that none is handed out again.
   * (SQLite reads the next id from the entries themselves and writes the counter only here.)
   */
  const keepIdsOf = (tx: SqlExecutor, sessionKey: string) =>
    tx.run(
      'INSERT INTO memory_counters (session_key, next_id) ' +
        'SELECT session_key, max(memory_id) + 1 FROM memory_entries WHERE session_key = ? GROUP BY session_key ' +
        `ON CONFLICT (session_key) DO UPDATE SET next_id = ${dialect === 'postgres' ? 'GREATEST' : 'MAX'}(memory_counters.next_id, excluded.next_id)`,
      [sessionKey],
    );

  /**
   * Deletes the entries of `sessionKey` that `test` (a WHERE clause over `params`) names, with their vectors,
   * the key's ids kept first; the number deleted. The one place entries are deleted: their rows of the
   * full-text index go with them (the delete trigger), which kept newest-match lookups must learn.
   */
  const deleteEntries = async (
    tx: SqlExecutor,
    sessionKey: string,
    test: string,
    params: ReadonlyArray<SqlValue>,
  ): Promise<number> => {
    indexDeletions++;
    await tx.run(
      `DELETE FROM memory_vectors WHERE entry_id IN (SELECT id FROM memory_entries WHERE ${test})`,
      params,
    );
    await keepIdsOf(tx, sessionKey);
    return (await tx.run(`DELETE FROM memory_entries WHERE ${test}`, params)).changes;
  };

  /**
   * Reserves `count` consecutive MemoryIDs for a key; returns the first. On SQLite the transaction holds the
   * database's write lock, so reading the next free id is a reservation: the entries' unique (key, id) index
   * answers it from its last page, and no counter row is rewritten in every commit. On Postgres the counter
   * row's lock serialises writers of the key.
   */
  const reserveIds = async (
    tx: SqlExecutor,
    sessionKey: string,
    count: number,
    atLeast: number,
  ): Promise<number> => {
    if (dialect === 'sqlite') {
      const free = await tx.get<{ next_id: number }>(nextFreeIdSql, [sessionKey, sessionKey]);
      return Math.max(atLeast, Number(free?.next_id ?? 1));
    }
    // `atLeast` keeps the counter ahead of ids handed out while the database was unavailable.
    const row = await tx.get<{ next_id: number }>(
      'INSERT INTO memory_counters (session_key, next_id) VALUES (?, ?) ON CONFLICT (session_key) DO UPDATE SET next_id = ' +
        'CASE WHEN memory_counters.next_id >= ? THEN memory_counters.next_id ELSE ? END + ? RETURNING next_id',
      [sessionKey, atLeast + count, atLeast, atLeast, count],
    );
    return Number(row!.next_id) - count;
  };

  const setStates = async (
    tx: SqlExecutor,
    sessionKey: string,
    memoryIds: ReadonlyArray<number>,
    state: MemoryState,
    nowMs: number,
  ): Promise<void> => {
    if (memoryIds.length === 0) return;
    await tx.run(setStatesSql(memoryIds.length), [state, nowMs, sessionKey, ...memoryIds]);
  };

  const insertEvent = async (tx: SqlExecutor, event: MemoryEventRow): Promise<void> => {
    await tx.run(insertEventSql, eventParams(event));
  };

  /** Writes a retirement in statements of its own (state change and event issued together). */
  const retire = async (tx: SqlExecutor, sessionKey: string, retirement: Retirement): Promise<void> => {
    await Promise.all([
      setStates(tx, sessionKey, retirement.memoryIds, retirement.state, retirement.nowMs),
      insertEvent(tx, retirement.event),
    ]);
  };

  /** The upsert `touchSession` runs, as a statement a commit's INSERT can fold in (`FoldedStatement`). */
  const touchSessionStatement = (ref: SessionRef, nowMs: number, ids: TouchedIdRange): FoldedStatement => ({
    sql:
      'INSERT INTO memory_sessions (session_id, session_key, agent_id, created_at_ms, last_active_ms, first_memory_id, live_from_id) ' +
      'VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET last_active_ms = excluded.last_active_ms, ' +
      'first_memory_id = coalesce(memory_sessions.first_memory_id, excluded.first_memory_id), ' +
      'live_from_id = coalesce(excluded.live_from_id, memory_sessions.live_from_id)',
    params: [ref.sessionId, ref.sessionKey, ref.agentId, nowMs, nowMs, ids.firstId, ids.liveFromId],
  });

  /**
   * Reserves the ids of `entries` (built with consecutive ids from `firstId` on), inserts them and writes
   * `retirement`; throws MemoryIdsTakenError when the counter had passed `firstId`. On Postgres the
   * reservation, the retirement and `folded` are data-modifying CTEs of the first INSERT (which returns each
   * folded statement's row count, in order), and every statement is issued before any answer is awaited: on
   * `tx` they share a round trip, and on the database itself an INSERT of up to `entriesPerInsert` entries is
   * the whole commit.
   */
  const insertReserved = async (
    tx: SqlExecutor,
    sessionKey: string,
    firstId: number,
    entries: ReadonlyArray<StoredEntry>,
    retirement?: Retirement,
    folded: ReadonlyArray<FoldedStatement> = [],
  ): Promise<number[]> => {
    const count = entries.length;
    if (dialect !== 'postgres') {
      if (folded.length > 0)
        throw new SystemError({
          code: ErrorCodes.internal,
          message: 'statements fold into an INSERT on Postgres only',
        });
      // The INSERT checks the first id itself: one statement where a read of the next free id and the INSERT
      // were two, for each of a chat turn's two commits.
      if (count > 0) await insertEntries(tx, entries, sessionKey);
      if (retirement) await retire(tx, sessionKey, retirement);
      return [];
    }
    // The CTEs touch other rows than the INSERT (and Postgres runs each exactly once, to completion): the
    // retired rows keep their places, and the context trigger of a new row skips tombstones either way.
    let ctes = '';
    const cteParams: SqlValue[] = [];
    if (retirement && retirement.memoryIds.length > 0) {
      ctes += `, retired AS (${setStatesSql(retirement.memoryIds.length)})`;
      cteParams.push(retirement.state, retirement.nowMs, sessionKey, ...retirement.memoryIds);
    }
    if (retirement) {
      ctes += `, logged AS (${insertEventSql})`;
      cteParams.push(...eventParams(retirement.event));
    }
    // Each folded statement is a CTE of its own whose rows the INSERT's RETURNING counts: its `changes`.
    let foldedCounts = '';
    for (const [index, statement] of folded.entries()) {
      ctes += `, folded_${index} AS (${statement.sql} RETURNING 1)`;
      cteParams.push(...statement.params);
      foldedCounts += `, (SELECT count(*) FROM folded_${index}) AS folded_${index}`;
    }
    const chunks: StoredEntry[][] = [];
    for (let start = 0; start < count; start += entriesPerInsert)
      chunks.push(entries.slice(start, start + entriesPerInsert));
    const insertStatements = chunks.map((chunk, index) => {
      const params = entriesParams(chunk);
      if (index > 0)
        return tx.all<{ id: number; memory_id: number }>(insertEntriesSql(chunk.length, 'returning'), params);
      const rows = chunk.map(() => entryPlaceholders);
      rows[0] = checkedEntryPlaceholders;
      params.splice(1, 0, firstId + count);
      return tx.all<{ id: number; memory_id: number }>(
        `${reservingCte}${ctes} ${insertEntryPrefix}${rows.join(', ')} RETURNING id, memory_id${foldedCounts}`,
        [sessionKey, firstId + count, firstId, firstId, count, ...cteParams, ...params],
      );
    });
    // Awaited in order: a failure of the first is the cause of the failures behind it.
    for (const insert of insertStatements) insert.catch(() => {});
    let changes: number[] = [];
    for (const [index, insert] of insertStatements.entries()) {
      let rows: Array<{ id: number; memory_id: number }>;
      try {
        rows = await insert;
      } catch (error) {
        if (index === 0 && isIdsTakenViolation(error)) throw new MemoryIdsTakenError(sessionKey, firstId);
        throw error;
      }
      noteInsertedRowId(setRowIds(chunks[index]!, rows));
      if (index === 0)
        changes = folded.map((_, at) => Number((rows[0] as Record<string, unknown>)[`folded_${at}`]));
    }
    return changes;
  };

  /**
   * Rows matching each term (capped at the row budget + 1), kept until the table has grown by a tenth:
   * counting a common term costs about 0.1 µs per matching row. Most document frequencies move slowly, but a
   * word a conversation keeps using grows with every turn (a user's recurring "say" or project name), so a
   * count under the cap only holds while every row added since could match and still leave it under.
   */
  const termRowCounts = new Map<string, { rows: number; cap: number; highestRowId: number }>();
  const maxCachedTerms = 4_096;

  /**
   * A term's row count (capped at `cap + 1`) while its cached count still holds, else undefined. Under the
   * cap the answer is the most it can be now (each row added since may match it), so a plan made from it
   * never ranks more rows than its budget.
   */
  const cachedTermRows = (term: string, cap: number, highestRowId: number): number | undefined => {
    const cached = termRowCounts.get(term);
    if (!cached || cached.cap < cap) return undefined;
    const added = highestRowId - cached.highestRowId;
    // Past a tenth of growth, deleted rows may have taken a common term back under the cap.
    if (added > cached.highestRowId / 10) return undefined;
    if (cached.rows > cap) return cap + 1;
    const atMost = cached.rows + Math.max(0, added);
    return atMost > cap ? undefined : atMost;
  };

  const countTermRows = async (term: string, cap: number, highestRowId: number): Promise<number> => {
    const row = await db.get<{ n: number }>(
      dialect === 'sqlite'
        ? 'SELECT count(*) AS n FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?) m'
        : `SELECT count(*) AS n FROM (SELECT 1 FROM memory_entries e WHERE ${pgWords} @@ to_tsquery('english', ?) LIMIT ?) m`,
      [dialect === 'sqlite' ? ftsAnyOf([term]) : term, cap + 1],
    );
    const rows = Number(row?.n ?? 0);
    termRowCounts.delete(term);
    if (termRowCounts.size >= maxCachedTerms) termRowCounts.delete(termRowCounts.keys().next().value!);
    termRowCounts.set(term, { rows, cap, highestRowId });
    return rows;
  };

  /**
   * The full-text index's vocabulary (SQLite): each term FTS5 holds with the rows that hold it, kept in
   * JavaScript so that a search needs no statement to count a word it has not counted yet. Such a count reads
   * the term in every segment of the index: 66–78 µs inside a turn at 100,000 entries, 0.61–0.75 a search
   * in the recall-in-turn benchmark, whose questions name words of the conversation that were not counted
   * yet. A query word of ASCII letters and digits is the index's term once stemmed (`porterStem`, checked
   * against FTS5's own tokenizer); other words are counted by statement as before.
   *
   * Read by a worker thread (`readVocabulary`) after each merge of the index (a process's first search, then
   * each time the table has doubled), when the index is one segment. From the read's start on, each batch
   * this store indexes reads the texts it indexes, in its transaction, and adds their terms to the counts,
   * tokenized as FTS5 does (`forEachIndexTerm`, which may name a term too many, never one too few): the
   * counts then cover every row up to `upTo`, the index mark the store last moved. A row indexed after the
   * read began is counted twice when the reader met its term afterwards, and a row deleted since stays
   * counted: a count can be too high, and a plan made from it ranks fewer rows than its budget, never more.
   * A batch that finds the mark moved by another process drops the vocabulary until the next merge (those
   * rows are not counted); until then they are past `upTo`, where every row counts as one that may hold any
   * word, once this store's highest row id has seen them (within its age, as for the cached counts). Above
   * `maxVocabularyTerms` terms no vocabulary is kept.
   */
  let vocabulary: IndexVocabulary | undefined;
  /** The vocabulary being loaded, while the one before it still answers. */
  let loadingVocabulary: IndexVocabulary | undefined;
  /** The load under way, if any (`loadVocabulary`): it settles once its reader's thread is gone. */
  let vocabularyLoad: Promise<void> | undefined;
  /** Aborted when the database closes, ending any load and refusing the next (see `loadVocabulary`). */
  let vocabularyReadsEnd: AbortController | undefined;
  const maxVocabularyTerms = options.maxVocabularyTerms ?? 100_000;
  /**
   * The longest term the vocabulary and the stem cache keep. Their caps count terms, not bytes, and a term
   * is as long as a caller's word; no word of a language is this long, and a search for one longer is
   * counted by statement, as without a vocabulary.
   */
  const maxVocabularyTermChars = 64;
  /** Stems of the words batches and searches meet, so that a word a conversation keeps using is stemmed once. */
  const stems = new Map<string, string>();
  const maxStems = 16_384;
  const stemOf = (token: string): string => {
    // Not kept: a message of one 100,000-character word would hold that much in each map. Porter leaves
    // such words as they are.
    if (token.length > maxVocabularyTermChars) return porterStem(token);
    let stem = stems.get(token);
    if (stem === undefined) {
      if (stems.size >= maxStems) stems.clear();
      stem = porterStem(token);
      stems.set(token, stem);
    }
    return stem;
  };
  const countingVocabularies = () =>
    [vocabulary, loadingVocabulary].filter((known): known is IndexVocabulary => known !== undefined);
  const dropVocabulary = (known: IndexVocabulary) => {
    if (vocabulary === known) vocabulary = undefined;
    if (loadingVocabulary === known) loadingVocabulary = undefined;
  };

  /**
   * What a batch about to run in `tx` adds to the vocabularies that count it: the rows holding each ASCII
   * term among the entries it indexes (read before it, in its transaction), and those vocabularies.
   */
  const vocabularyBeforeBatch = async (
    tx: SqlExecutor,
  ): Promise<{ counting: IndexVocabulary[]; rows: Map<string, number> } | undefined> => {
    const counting = countingVocabularies();
    if (counting.length === 0) return undefined;
    const mark = Number((await tx.get<{ up_to: number }>(indexMarkSql))?.up_to ?? 0);
    for (const known of counting) if (known.upTo !== mark) dropVocabulary(known);
    const kept = counting.filter((known) => known.upTo === mark);
    if (kept.length === 0) return undefined;
    const rows = new Map<string, number>();
    const count = (term: string) => {
      if (term.length <= maxVocabularyTermChars) rows.set(term, (rows.get(term) ?? 0) + 1);
    };
    for (const { text } of await tx.all<{ text: string }>(pendingIndexTextsSql))
      forEachIndexTerm(text, stemOf, count);
    return { counting: kept, rows };
  };

  /**
   * Adds a batch's rows to the vocabularies that counted them, now covering the rows up to `upTo`. Should the
   * batch's transaction roll back, the mark in the database stays short of `upTo`, and the next batch,
   * finding it so, drops these counts.
   */
  const vocabularyAfterBatch = (
    batch: { counting: IndexVocabulary[]; rows: Map<string, number> } | undefined,
    upTo: number,
  ): void => {
    if (batch === undefined) return;
    for (const known of batch.counting) {
      for (const [term, rows] of batch.rows) known.counts.set(term, (known.counts.get(term) ?? 0) + rows);
      known.upTo = upTo;
      if (known.counts.size > maxVocabularyTerms) dropVocabulary(known);
    }
  };

  /**
   * Reads the index's vocabulary into a new one, which answers from then on; the one before it answers until
   * then. The reading is a worker thread's, on a read-only connection of its own: FTS5 counts a term's rows by
   * walking its whole list of rows (2 ms for a word in every one of 100,000 entries), which on the event loop
   * would hold every turn waiting behind it. A database only in memory has no file to open a second
   * connection to, and keeps no vocabulary. A load asked for while one is under way is that load.
   *
   * The reader's connection lives no longer than the database's: closing the database ends the load and
   * waits for it, its reader's thread gone, first. A read-only connection outliving the last writer would make
   * the WAL files again beside a database its owner has closed, perhaps in a directory being removed.
   */
  const loadVocabulary = (): Promise<void> => {
    if (dialect !== 'sqlite') return Promise.resolve();
    if (vocabularyLoad !== undefined) return vocabularyLoad;
    if (vocabularyReadsEnd === undefined) {
      const readsEnd = new AbortController();
      vocabularyReadsEnd = readsEnd;
      db.onClose(async () => {
        readsEnd.abort();
        await vocabularyLoad;
      });
    }
    const { signal } = vocabularyReadsEnd;
    if (signal.aborted) return Promise.resolve();
    const load = readIntoVocabulary(signal).finally(() => {
      vocabularyLoad = undefined;
    });
    vocabularyLoad = load;
    return load;
  };

  /** `loadVocabulary`'s one load; never rejects (a failed read leaves searches counting by statement). */
  const readIntoVocabulary = async (ending: AbortSignal): Promise<void> => {
    let loading: IndexVocabulary | undefined;
    try {
      const file = (await db.all<{ name: string; file: string }>('PRAGMA database_list')).find(
        (row) => row.name === 'main',
      )?.file;
      if (!file) return;
      await indexPending();
      // Batches from here on are counted into `loading` (a batch before the mark is read would find it moved);
      // the reader's snapshots all hold the rows up to it.
      const upTo = Number((await db.get<{ up_to: number }>(indexMarkSql))?.up_to ?? 0);
      const counting: IndexVocabulary = { counts: new Map(), upTo };
      loading = counting;
      loadingVocabulary = counting;
      const read = await readVocabulary(
        file,
        (terms) => {
          if (loadingVocabulary !== counting) return false;
          for (const [term, doc] of terms)
            if (term.length <= maxVocabularyTermChars)
              counting.counts.set(term, (counting.counts.get(term) ?? 0) + doc);
          return counting.counts.size <= maxVocabularyTerms;
        },
        { signal: ending },
      );
      if (loadingVocabulary !== counting) return;
      loadingVocabulary = undefined;
      // Too many words to keep: every search counts its words by statement again.
      vocabulary = read ? counting : undefined;
    } catch {
      // Searches count their words by statement, as without a vocabulary; the next merge tries again.
      if (loading !== undefined && loadingVocabulary === loading) loadingVocabulary = undefined;
      vocabulary = undefined;
    }
  };

  /**
   * The vocabulary's rows for `word` and the rows past the mark it has counted to, each of which may hold the
   * word; undefined when it has no answer (none read, or not a word of ASCII letters and digits).
   */
  const vocabularyRowsOf = (
    word: string,
    highestRowId: number,
  ): { rows: number; pending: number } | undefined => {
    const known = vocabulary;
    if (known === undefined || !isPlainToken(word)) return undefined;
    const stem = stemOf(word);
    // Words this long are not kept in it (`maxVocabularyTermChars`): counted by statement.
    if (stem.length > maxVocabularyTermChars) return undefined;
    return { rows: known.counts.get(stem) ?? 0, pending: Math.max(0, highestRowId - known.upTo) };
  };

  /**
   * A term's rows by the vocabulary, as `cachedTermRows` answers: at most `cap + 1`, or undefined when the
   * vocabulary cannot say, or says more than the cap only with rows added since its count.
   */
  const vocabularyTermRows = (term: string, cap: number, highestRowId: number): number | undefined => {
    const known = vocabularyRowsOf(term, highestRowId);
    if (known === undefined) return undefined;
    if (known.rows > cap) return cap + 1;
    const atMost = known.rows + known.pending;
    return atMost > cap ? undefined : atMost;
  };

  /**
   * Keeping the SQLite full-text index merged. Every transaction that inserts entries leaves a new FTS5
   * segment, and FTS5's own automerge keeps up to three per level, so a grown index has 6–20 segments; a term
   * lookup reads each one (about 90 µs over the 6 segments of 100,000 bulk-written entries against 15 µs over
   * one). Once the table has grown by `mergeGrowth` times its size at the last merge (at least `mergeMinRows`
   * rows), and on a process's first search, the whole index is merged into one segment in the background: steps of
   * `mergePages` pages (about 1.5 ms each at 100,000 entries, a few up to 15 ms where an input segment is
   * dropped), each followed by a pause of `mergePause` times its duration, so the merge takes about a tenth
   * of the time while it runs and never holds a turn for a whole merge (0.4 s of work at 100,000 entries).
   * Merging each time the table has doubled rewrites each entry's index data about twice over the store's life
   * (each merge rewrites what the ones before it wrote: a geometric series). Merging at every tenth of growth
   * rewrote it about eleven times and bought nothing under chat traffic: the turns' own batches bring the
   * index back to 13–19 segments within a few hundred turns, so a search costs the same either way, and the
   * merges cost 70–90 µs of CPU a turn at 100,000 entries (docs/memory.md).
   */
  const indexMerge: { mergedAtRowId: number | undefined; running: boolean } = {
    mergedAtRowId: undefined,
    running: false,
  };
  const mergeGrowth = 1;
  const mergeMinRows = 1_000;
  const mergePages = 16;
  const mergePause = 9;

  /**
   * One bounded merge step: FTS5 writes about `mergePages` pages of merged segments. The first step of a
   * merge (`start`) puts every segment on one level, so the steps after it merge them all into one; later
   * steps go on with that merge even when new segments arrive meanwhile. Whether FTS5 found work is told by
   * the connection's total changes (2 or more when it wrote), read in the same transaction.
   */
  const mergeIndexStep = async (start: boolean): Promise<boolean> =>
    db.transaction(
      async (tx) => {
        const before = await tx.get<{ n: number }>('SELECT total_changes() AS n');
        await tx.run("INSERT INTO memory_fts (memory_fts, rank) VALUES ('merge', ?)", [
          start ? -mergePages : mergePages,
        ]);
        const after = await tx.get<{ n: number }>('SELECT total_changes() AS n');
        return Number(after?.n ?? 0) - Number(before?.n ?? 0) >= 2;
      },
      { ambient: false },
    );

  const indexSegments = async (): Promise<number> => {
    const row = await db.get<{ n: number }>('SELECT count(DISTINCT segid) AS n FROM memory_fts_idx');
    return Number(row?.n ?? 0);
  };

  /** Merges the whole index in bounded steps, pausing between them (no pause when `pause` is 0). */
  const mergeIndex = async (pause: number): Promise<void> => {
    if (dialect !== 'sqlite') return;
    await indexPending();
    if ((await indexSegments()) <= 1) return;
    for (let start = true; ; start = false) {
      const began = performance.now();
      if (!(await mergeIndexStep(start))) return;
      if (pause > 0) {
        const wait = (performance.now() - began) * pause;
        await new Promise((resolve) => setTimeout(resolve, wait).unref());
      }
    }
  };

  /** Starts a background merge when the index has grown enough since the last one (see `indexMerge`). */
  const noteIndexSize = (highestRowId: number) => {
    const merged = indexMerge.mergedAtRowId;
    // Postgres's GIN indexes fold their pending entries in by themselves.
    if (dialect !== 'sqlite' || indexMerge.running) return;
    if (merged !== undefined && highestRowId - merged < Math.max(mergeMinRows, merged * mergeGrowth)) return;
    indexMerge.running = true;
    setTimeout(() => {
      mergeIndex(mergePause)
        .catch(() => {
          // The index stays as it is, still correct; the next merge is tried after the next growth.
        })
        .finally(() => {
          indexMerge.mergedAtRowId = highestRowId;
          indexMerge.running = false;
          // Read at its cheapest: one segment.
          void loadVocabulary();
        });
    }, 0).unref();
  };

  /** Any of the terms, as the dialect's full-text query text: an FTS5 MATCH expression or a tsquery. */
  const anyOf = dialect === 'sqlite' ? ftsAnyOf : tsqueryAnyOf;

  /**
   * How a search ranks under a row budget of `maxScoredRows`. Ranking touches every row matching a term
   * (bm25() twice: once to count it for the inverse document frequency, once to score it; ts_rank once,
   * after Postgres has joined each entry's words with the turns before it), so terms are taken rarest first
   * while their matches fit the budget: the common ones left out carry the least weight. When even the
   * rarest term matches more rows than the budget, no term says much about relevance, and the search takes
   * that term's newest matches (a memory favours the recent when a query names nothing rarer). Under the
   * budget, every term is ranked as before. `match` is the dialect's query text of the terms kept; `leftOut`
   * the rarest term with matches that was not kept, for a caller whose kept terms find too little.
   */
  const matchPlan = async (
    terms: ReadonlyArray<string>,
    maxScoredRows: number,
  ): Promise<
    { match: string; leftOut?: string; term?: never } | { match?: never; leftOut?: never; term: string }
  > => {
    if (!Number.isFinite(maxScoredRows)) return { match: anyOf(terms) };
    const highestRowId = await highestEntryRowId();
    noteIndexSize(highestRowId);
    if (highestRowId <= maxScoredRows) return { match: anyOf(terms) };
    const counted = terms.map((term) => ({
      term,
      // The vocabulary first: its counts are current, a cached count grows looser with every row added.
      rows:
        vocabularyTermRows(term, maxScoredRows, highestRowId) ??
        cachedTermRows(term, maxScoredRows, highestRowId) ??
        Number.NaN,
    }));
    // The terms not counted yet are counted together: on Postgres their queries go out at once on pooled
    // connections instead of one round trip after another.
    const uncounted = counted.filter(({ rows }) => Number.isNaN(rows));
    if (uncounted.length > 0)
      await Promise.all(
        uncounted.map(async (entry) => {
          entry.rows = await countTermRows(entry.term, maxScoredRows, highestRowId);
        }),
      );
    counted.sort((left, right) => left.rows - right.rows);
    // A term counted at 0 stays in: the count may predate the first entry that has it.
    const kept: string[] = [];
    let scored = 0;
    for (const { term, rows } of counted) {
      if (scored + rows > maxScoredRows) break;
      kept.push(term);
      scored += rows;
    }
    // Terms counted at 0 alone would find nothing while a commoner term has matches.
    const rarest = counted.find(({ rows }) => rows > 0);
    if (!rarest) return { match: anyOf(kept.length > 0 ? kept : terms) };
    if (kept.length > 0 && scored > 0) {
      const leftOut = counted[kept.length]?.term;
      return leftOut === undefined ? { match: anyOf(kept) } : { match: anyOf(kept), leftOut };
    }
    return { term: rarest.term };
  };

  /** `fullText`'s ranking of what `plan` keeps (see `matchPlan`): the kept terms' matches, or the newest of one term. */
  const rankedRows = async (
    filter: EntryFilter,
    plan: { match: string; term?: never } | { match?: never; term: string },
    limit: number,
    weights: ContextWeights,
    enough: number,
    maxScoredRows: number,
  ): Promise<RankedRow[]> => {
    const params: SqlValue[] = [];
    if (dialect === 'sqlite') {
      const where = filterSql(filter, params, agentTest);
      if (plan.term !== undefined) {
        // The newest matches that pass the filter, in the entry's own words (1) or in the turns before it
        // (weights.before), among the newest `maxScoredRows`. FTS5 drives the join (the agent's test is
        // `agentTest`, which no index serves), newest row first, so the scan stops once enough rows pass.
        const phrase = ftsAnyOf([plan.term]);
        // The scan for the newest matches that pass the search's filter stops at this row, so an agent
        // with few entries among many of other agents costs no more than the budget.
        const boundary = await db.get<{ rowid: number }>(
          'SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?',
          [phrase, maxScoredRows - 1],
        );
        const fromRowId = Number(boundary?.rowid ?? 0);
        const newest =
          `SELECT memory_fts.rowid AS rowid, ? AS weight FROM memory_fts JOIN memory_entries e ON e.id = memory_fts.rowid ` +
          `WHERE memory_fts MATCH ? AND memory_fts.rowid >= ? AND ${where} ORDER BY memory_fts.rowid DESC LIMIT ?`;
        const candidates = Math.max(limit * 2, 50);
        return db.all<RankedRow>(
          `SELECT ${entryColumns}, f.rank AS rank FROM (SELECT rowid, sum(weight) AS rank FROM (` +
            `SELECT * FROM (${newest}) UNION ALL SELECT * FROM (${newest})) GROUP BY rowid) f ` +
            'JOIN memory_entries e ON e.id = f.rowid ORDER BY f.rank DESC, e.id DESC LIMIT ?',
          [
            1,
            `content : ${phrase}`,
            fromRowId,
            ...params,
            candidates,
            weights.before,
            `before : ${phrase}`,
            fromRowId,
            ...params,
            candidates,
            limit,
          ],
        );
      }
      const bm25 = 'bm25(memory_fts, 1.0, ?)';
      const columnWeights = [weights.before];
      // Rank inside FTS5 first and join only the best candidates: joining every match of a common term
      // before ranking costs far more. When filters drop too many candidates, rank over the full join.
      const candidates = Math.max(limit * 2, 50);
      let rows = await db.all<RankedRow>(
        `SELECT ${entryColumns}, f.rank AS rank FROM (SELECT rowid, ${bm25} AS rank FROM memory_fts ` +
          `WHERE memory_fts MATCH ? ORDER BY rank LIMIT ?) f JOIN memory_entries e ON e.id = f.rowid WHERE ${where} ORDER BY f.rank LIMIT ?`,
        [...columnWeights, plan.match, candidates, ...params, limit],
      );
      if (rows.length < Math.min(enough, limit)) {
        const total = await db.get<{ n: number }>(
          'SELECT count(*) AS n FROM (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?) m',
          [plan.match, candidates],
        );
        if (Number(total?.n ?? 0) >= candidates) {
          rows = await db.all<RankedRow>(
            `SELECT ${entryColumns}, ${bm25} AS rank FROM memory_fts JOIN memory_entries e ON e.id = memory_fts.rowid ` +
              `WHERE memory_fts MATCH ? AND ${where} ORDER BY rank LIMIT ?`,
            [...columnWeights, plan.match, ...params, limit],
          );
        }
      }
      // bm25() is lower-is-better.
      return rows.map((row) => ({ ...row, rank: -Number(row.rank) }));
    }
    // ts_rank weights are listed {D, C, B, A}: the entry's own words carry D, the turns before B.
    params.push(`{1, 0, ${Number(weights.before)}, 0}`);
    // Past the budget, the rows ranked are the newest `maxScoredRows` matches of the term (a backward walk
    // of the primary key for a common term, which stops there); under it, every match of the terms kept.
    let ranked = 'memory_entries e';
    let matched = `${pgWords} @@ q AND `;
    if (plan.term !== undefined) {
      ranked =
        `(SELECT e.id FROM memory_entries e WHERE ${pgWords} @@ to_tsquery('english', ?) ORDER BY e.id DESC LIMIT ?) newest ` +
        'JOIN memory_entries e ON e.id = newest.id';
      matched = '';
      params.push(plan.term, maxScoredRows);
    }
    params.push(plan.term ?? plan.match);
    const where = filterSql(filter, params, agentTest);
    const rows = await db.all<RankedRow>(
      `SELECT ${entryColumns}, ts_rank(?::real[], ${pgWords}, q, 1) AS rank FROM ${ranked}, to_tsquery('english', ?) q ` +
        `WHERE ${matched}${where} ORDER BY rank DESC, e.id DESC LIMIT ?`,
      [...params, limit],
    );
    return rows.map((row) => ({ ...row, rank: Number(row.rank) }));
  };

  return {
    dialect,

    /** Whether `count` new entries go in one INSERT statement (`insertReserved`'s first, with its CTEs). */
    insertsInOneStatement: (count: number) => count <= entriesPerInsert,

    /**
     * Merges the full-text index into one segment now, in the background merge's steps without its pauses
     * (SQLite; nothing to do on Postgres, whose GIN index folds its pending entries in on its own).
     */
    mergeIndex: () => mergeIndex(0),

    /** Segments of the SQLite full-text index, brought up to date first (0 on Postgres). */
    indexSegments: async () => {
      if (dialect !== 'sqlite') return 0;
      await indexPending();
      return indexSegments();
    },

    /** Brings the SQLite full-text index up to date with every committed entry (see `indexPending`). */
    indexPending,

    /**
     * Reads the SQLite full-text index's vocabulary now, as the background load after a merge does (see
     * `vocabulary`), or waits for the read under way; nothing on Postgres or for a database only in memory.
     */
    loadIndexVocabulary: () => loadVocabulary(),

    /**
     * The most rows that may hold `word` by the index vocabulary (rows past the mark it has counted to
     * included), or undefined when it has no answer: none loaded, or not a word of ASCII letters and digits.
     */
    vocabularyWordRows: async (word: string): Promise<number | undefined> => {
      const known = vocabularyRowsOf(word, await highestEntryRowId());
      return known === undefined ? undefined : known.rows + known.pending;
    },

    transaction: <T>(work: (tx: TransactionExecutor) => Promise<T>, options?: TransactionOptions) =>
      db.transaction(work, options),

    /**
     * Records the instance's activity, and the bounds through which its entries are found again
     * (`InstanceIdRange`): `ids.firstId` is kept from the instance's first commit on, `ids.liveFromId` replaced.
     */
    async touchSession(tx: SqlExecutor, ref: SessionRef, nowMs: number, ids: TouchedIdRange): Promise<void> {
      const { sql, params } = touchSessionStatement(ref, nowMs, ids);
      await tx.run(sql, params);
    },

    touchSessionStatement,

    async getSession(sessionId: string) {
      const row = await db.get<{
        session_id: string;
        session_key: string;
        agent_id: string;
        last_active_ms: number;
        archived_at_ms: number | null;
        first_memory_id: number | null;
        live_from_id: number | null;
      }>(
        'SELECT session_id, session_key, agent_id, last_active_ms, archived_at_ms, first_memory_id, live_from_id ' +
          'FROM memory_sessions WHERE session_id = ?',
        [sessionId],
      );
      if (!row) return undefined;
      return {
        ref: { sessionId: row.session_id, sessionKey: row.session_key, agentId: row.agent_id },
        lastActiveMs: Number(row.last_active_ms),
        archivedAtMs: row.archived_at_ms === null ? null : Number(row.archived_at_ms),
        ids:
          row.first_memory_id === null
            ? undefined
            : {
                firstId: Number(row.first_memory_id),
                liveFromId: Number(row.live_from_id ?? row.first_memory_id),
              },
      };
    },

    async nextIdOf(sessionKey: string): Promise<number> {
      const row = await db.get<{ next_id: number }>(nextFreeIdSql, [sessionKey, sessionKey]);
      return row ? Number(row.next_id) : 1;
    },

    reserveIds,

    insertEntries,

    insertReserved,

    setStates,

    retire,

    /**
     * Active entries and the newest `maxTombstones` tombstones of a live session instance, in context order:
     * read from the key's range of MemoryIDs that `ids` (the instance's row) bounds (none: it wrote nothing).
     */
    async loadRam(
      ref: SessionRef,
      ids: InstanceIdRange | undefined,
      maxTombstones: number,
    ): Promise<StoredEntry[]> {
      if (ids === undefined) return [];
      const instance = `${instanceRangeTest} AND archived_at_ms IS NULL`;
      const active = await db.all<EntryRow>(
        `SELECT ${entryColumns} FROM memory_entries e WHERE ${instance} AND e.state = 'active'`,
        [ref.sessionKey, ids.liveFromId, ref.sessionId],
      );
      const tombstones =
        maxTombstones > 0
          ? await db.all<EntryRow>(
              `SELECT ${entryColumns} FROM memory_entries e WHERE ${instance} AND e.state = 'tombstone' ` +
                'ORDER BY e.memory_id DESC LIMIT ?',
              [ref.sessionKey, ids.firstId, ref.sessionId, maxTombstones],
            )
          : [];
      return [...active, ...tombstones].map(rowToEntry).sort(byContextOrder);
    },

    async archiveSession(tx: SqlExecutor, ref: SessionRef, reason: string, nowMs: number): Promise<number> {
      await tx.run('UPDATE memory_sessions SET archived_at_ms = ?, archive_reason = ? WHERE session_id = ?', [
        nowMs,
        reason,
        ref.sessionId,
      ]);
      // An instance that wrote no entry has no first id: the range is empty.
      const result = await tx.run(
        'UPDATE memory_entries SET archived_at_ms = ?, updated_at_ms = ? WHERE session_key = ? AND memory_id >= ' +
          '(SELECT first_memory_id FROM memory_sessions WHERE session_id = ?) AND session_id = ? AND archived_at_ms IS NULL',
        [nowMs, nowMs, ref.sessionKey, ref.sessionId, ref.sessionId],
      );
      return result.changes;
    },

    async insertSnapshot(tx: SqlExecutor, snapshot: SnapshotRow): Promise<void> {
      await tx.run(
        'INSERT INTO memory_snapshots (id, session_id, session_key, agent_id, reason, next_id, entry_count, summary_count, ' +
          'tombstone_count, active_tokens, active_ids, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        [
          ...sessionLogHeadValues(snapshot),
          snapshot.reason,
          snapshot.nextId,
          snapshot.entryCount,
          snapshot.summaryCount,
          snapshot.tombstoneCount,
          snapshot.activeTokens,
          JSON.stringify(snapshot.activeIds),
          snapshot.createdAtMs,
        ],
      );
    },

    async listSnapshots(sessionKey: string, limit: number): Promise<SnapshotRow[]> {
      const rows = await newestSessionLogRows('memory_snapshots', sessionKey, limit);
      return rows.map((row) => ({
        ...sessionLogHeadOf(row),
        reason: String(row.reason),
        nextId: Number(row.next_id),
        entryCount: Number(row.entry_count),
        summaryCount: Number(row.summary_count),
        tombstoneCount: Number(row.tombstone_count),
        activeTokens: Number(row.active_tokens),
        activeIds: (JSON.parse(String(row.active_ids)) as unknown[]).map(Number),
        createdAtMs: Number(row.created_at_ms),
      }));
    },

    insertEvent,

    async listEvents(sessionKey: string, limit: number): Promise<MemoryEventRow[]> {
      const rows = await newestSessionLogRows('memory_events', sessionKey, limit);
      return rows.map((row) => ({
        ...sessionLogHeadOf(row),
        kind: String(row.kind),
        count: Number(row.count),
        tokensBefore: Number(row.tokens_before),
        tokensAfter: Number(row.tokens_after),
        memoryIds: (JSON.parse(String(row.memory_ids)) as unknown[]).map(Number),
        message: String(row.message),
        ...(row.details ? { details: parseJsonObject(String(row.details)) } : {}),
        createdAtMs: Number(row.created_at_ms),
      }));
    },

    /**
     * Newest written first (decisions 0035 and 0036). One session key's entries by MemoryID, its range of the
     * address index read backwards until `limit` rows pass the filter; an agent's across its sessions by row
     * id, the table's own order backwards (no index by agent and time: migration 0034; summaries have their
     * partial index). Neither sorts what it read.
     */
    async listEntries(filter: EntryFilter, limit: number): Promise<StoredEntry[]> {
      const params: SqlValue[] = [];
      const inKey = filter.sessionKey !== undefined;
      const where = filterSql(filter, params, inKey ? agentTest : byAgentTest);
      const order = inKey ? 'e.memory_id DESC' : 'e.id DESC';
      const rows = await db.all<EntryRow>(
        `SELECT ${entryColumns} FROM memory_entries e WHERE ${where} ORDER BY ${order} LIMIT ?`,
        [...params, limit],
      );
      return rows.map(rowToEntry);
    },

    async entriesByIds(
      filter: EntryFilter,
      ids: ReadonlyArray<{ sessionKey: string; memoryId: number }>,
      limit: number,
    ) {
      if (ids.length === 0) return [];
      const params: SqlValue[] = [];
      const where = `${filterSql(filter, params, agentTest)} AND ${addressesSql(ids, params)}`;
      const rows = await db.all<EntryRow>(
        `SELECT ${entryColumns} FROM memory_entries e WHERE ${where} ` +
          'ORDER BY e.created_at_ms DESC, e.id DESC LIMIT ?',
        [...params, limit],
      );
      return rows.map(rowToEntry);
    },

    async entryByAddress(sessionKey: string, memoryId: number): Promise<StoredEntry | undefined> {
      const row = await db.get<EntryRow>(
        `SELECT ${entryColumns} FROM memory_entries e WHERE e.session_key = ? AND e.memory_id = ?`,
        [sessionKey, memoryId],
      );
      return row ? rowToEntry(row) : undefined;
    },

    async entriesByRowIds(rowIds: ReadonlyArray<number>): Promise<Map<number, StoredEntry>> {
      const found = new Map<number, StoredEntry>();
      if (rowIds.length === 0) return found;
      const rows = await db.all<EntryRow>(
        `SELECT ${entryColumns} FROM memory_entries e WHERE e.id IN (${sqlPlaceholders(rowIds.length)})`,
        [...rowIds],
      );
      for (const row of rows) found.set(Number(row.id), rowToEntry(row));
      return found;
    },

    /**
     * Full-text ranking over each entry's words and those of the two turns before it (migration 0015), the
     * turns before counting `weights.before` of the entry's own words; `rank` is
     * higher-is-better on both dialects. Returns up to `limit` rows; when filters leave fewer than
     * `enough`, the ranking is redone over every match instead of the best-ranked ones (SQLite; Postgres ranks
     * every match that passes the filters at once). bm25() and ts_rank cost about a microsecond per matching
     * row, so `maxScoredRows` bounds the rows either ranks (see `matchPlan`). When the budget left a term out
     * and the terms kept give fewer than `enough` rows, that term's newest matches follow them, ranked below.
     */
    async fullText(
      filter: EntryFilter,
      terms: ReadonlyArray<string>,
      limit: number,
      weights: ContextWeights,
      enough = limit,
      maxScoredRows = Number.POSITIVE_INFINITY,
    ): Promise<RankedRow[]> {
      if (terms.length === 0) return [];
      if (dialect === 'sqlite') await indexBeforeRead();
      const plan = await matchPlan(terms, maxScoredRows);
      const rows = await rankedRows(filter, plan, limit, weights, enough, maxScoredRows);
      if (plan.leftOut === undefined || rows.length >= Math.min(enough, limit)) return rows;
      // The kept terms found fewer than the caller needs (a search asks for more candidates than it lists, to
      // smooth them): the left-out term's newest matches follow them, in their own order, as
      // matches of only a commoner word rank after those of the rarer ones when every match is ranked. Their
      // ranks stay under a quarter of the lowest kept one, so that the shares a search spreads to each turn's
      // neighbours (recall.neighbourWeights) do not lift them above the kept terms' matches.
      const listed = new Set(rows.map((row) => row.id));
      const newest = await rankedRows(filter, { term: plan.leftOut }, limit, weights, limit, maxScoredRows);
      const extra = newest.filter((row) => !listed.has(row.id)).slice(0, limit - rows.length);
      const below = rows.reduce((lowest, row) => Math.min(lowest, row.rank), Number.POSITIVE_INFINITY);
      return [
        ...rows,
        ...extra.map((row, index) =>
          rows.length === 0
            ? row
            : { ...row, rank: (below * (extra.length - index)) / (4 * (extra.length + 1)) },
        ),
      ];
    },

    /**
     * Automatic recall's candidates, as recall lines. While some terms fit `maxScoredRows` (see
     * `matchPlan`), the `candidates` best matches ranked as `fullText` ranks them (`order: 'rank'`; on SQLite
     * joining only the best `2 * candidates` matches, with no second pass when filters leave fewer: a prompt
     * hint takes what it finds). Past it, no term says much about relevance, and the answer is the term
     * whose newest matches are listed (`order: 'newest'`; see `newestMatchRowIds` and `linesByRowIds`).
     * A ranking that left terms out names the rarest of them (`leftOut`), whose newest matches can fill what
     * the kept terms do not.
     */
    async rankedLines(
      filter: EntryFilter,
      terms: ReadonlyArray<string>,
      candidates: number,
      weights: ContextWeights,
      maxScoredRows: number,
      unindexedOk?: UnindexedRowsTest,
    ): Promise<{ order: 'rank'; lines: RankedLine[]; leftOut?: string } | { order: 'newest'; term: string }> {
      if (terms.length === 0) return { order: 'rank', lines: [] };
      const params: SqlValue[] = [];
      if (dialect === 'sqlite') await indexBeforeRead(unindexedOk);
      const plan = await matchPlan(terms, maxScoredRows);
      if (plan.term !== undefined) return { order: 'newest', term: plan.term };
      let lines: RankedLine[];
      if (dialect === 'sqlite') {
        const where = filterSql(filter, params, agentTest);
        const rows = await db.all<Record<string, unknown>>(
          `SELECT ${rankedLineColumns}, f.rank AS rank FROM (SELECT rowid, bm25(memory_fts, 1.0, ?) AS rank FROM memory_fts ` +
            `WHERE memory_fts MATCH ? ORDER BY rank LIMIT ?) f JOIN memory_entries e ON e.id = f.rowid WHERE ${where} ORDER BY f.rank LIMIT ?`,
          [weights.before, plan.match, 2 * candidates, ...params, candidates],
        );
        // bm25() is lower-is-better.
        lines = rows.map((row) => rowToLine(row, -Number(row.rank), row.turn, row.stored_in_context));
      } else {
        params.push(`{1, 0, ${Number(weights.before)}, 0}`, plan.match);
        const where = filterSql(filter, params, agentTest);
        const rows = await db.all<Record<string, unknown>>(
          `SELECT ${rankedLineColumns}, ts_rank(?::real[], ${pgWords}, q, 1) AS rank FROM memory_entries e, to_tsquery('english', ?) q ` +
            `WHERE ${pgWords} @@ q AND ${where} ORDER BY rank DESC, e.id DESC LIMIT ?`,
          [...params, candidates],
        );
        lines = rows.map((row) => rowToLine(row, Number(row.rank), row.turn, row.stored_in_context));
      }
      return plan.leftOut === undefined
        ? { order: 'rank', lines }
        : { order: 'rank', lines, leftOut: plan.leftOut };
    },

    /**
     * Row ids of the newest matches of `term`, newest first: at most `limit`, below `belowRowId` when given.
     * One FTS5 lookup on SQLite, no entry row read; on Postgres the planner walks the primary key backwards
     * for a common term (the only kind asked: one matching more rows than the row budget) and stops there.
     */
    async newestMatchRowIds(
      term: string,
      limit: number,
      belowRowId?: number,
      unindexedOk?: UnindexedRowsTest,
    ): Promise<number[]> {
      if (dialect === 'postgres') {
        const rows = await db.all<{ id: number }>(
          `SELECT e.id FROM memory_entries e WHERE ${pgWords} @@ to_tsquery('english', ?)` +
            `${belowRowId === undefined ? '' : ' AND e.id < ?'} ORDER BY e.id DESC LIMIT ?`,
          belowRowId === undefined ? [term, limit] : [term, belowRowId, limit],
        );
        return rows.map((row) => Number(row.id));
      }
      if (belowRowId !== undefined) {
        await indexBeforeRead(unindexedOk);
        const rows = await db.all<{ rowid: number }>(
          'SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? AND rowid < ? ORDER BY rowid DESC LIMIT ?',
          [ftsAnyOf([term]), belowRowId, limit],
        );
        return rows.map((row) => Number(row.rowid));
      }
      // Read before the lookup: a commit or a deletion after them makes the lookup a stale one to keep.
      const version = unindexedOk === undefined ? undefined : db.readVersion?.();
      const deletions = indexDeletions;
      if (version !== undefined && unindexedOk !== undefined) {
        const kept = keptNewestLookup(term, limit, unindexedOk, version, await highestEntryRowId());
        if (kept !== undefined) return kept;
      }
      await indexBeforeRead(unindexedOk);
      // Before the lookup too: a batch indexed after it must not count as seen by it.
      const upTo = indexedUpTo;
      const fetched = 2 * limit;
      const rows = await db.all<{ rowid: number }>(
        'SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid DESC LIMIT ?',
        [ftsAnyOf([term]), fetched],
      );
      const rowIds = rows.map((row) => Number(row.rowid));
      if (version !== undefined && upTo !== undefined) {
        newestLookups.delete(term);
        if (newestLookups.size >= maxNewestLookups) newestLookups.delete(newestLookups.keys().next().value!);
        newestLookups.set(term, { rowIds, fetched, version, deletions, upTo });
      }
      return rowIds.slice(0, limit);
    },

    /**
     * Recall lines of the entries at the given row ids, with their agent, in no particular order (a row
     * deleted meanwhile is left out): one primary-key lookup each. The list of ids is padded to a power of
     * two (repeating the last), so a few statement texts serve every count.
     */
    async linesByRowIds(rowIds: ReadonlyArray<number>): Promise<RowLine[]> {
      if (rowIds.length === 0) return [];
      let size = 1;
      while (size < rowIds.length) size *= 2;
      const params: SqlValue[] = [...rowIds];
      while (params.length < size) params.push(rowIds[rowIds.length - 1]!);
      const rows = await db.all<Record<string, unknown>>(
        `SELECT e.id, e.agent_id, ${lineColumns}, (${storedInContextTest}) AS stored_in_context FROM memory_entries e ` +
          `WHERE e.id IN (${sqlPlaceholders(size)})`,
        params,
      );
      return rows.map((row) => ({
        rowId: Number(row.id),
        agentId: String(row.agent_id),
        sessionKey: String(row.session_key),
        memoryId: Number(row.memory_id),
        content: String(row.content),
        createdAtMs: Number(row.created_at_ms),
        speaker: String(row.speaker),
        storedInContext: Boolean(row.stored_in_context),
      }));
    },

    /**
     * Recall lines of the conversational turns (user and assistant entries, not tombstones) at the given
     * addresses that pass the filter, in no particular order: one index lookup per address.
     */
    async turnLinesAt(
      filter: EntryFilter,
      ids: ReadonlyArray<{ sessionKey: string; memoryId: number }>,
    ): Promise<RecallLine[]> {
      if (ids.length === 0) return [];
      const params: SqlValue[] = [];
      // SQLite plans the row-value list as one unique-index lookup per address (grouped ORs of many
      // sessions cost more); Postgres would compare the untyped VALUES as text, so it takes the groups.
      let addresses: string;
      if (dialect === 'sqlite') {
        for (const id of ids) params.push(id.sessionKey, id.memoryId);
        addresses = `(e.session_key, e.memory_id) IN (VALUES ${ids.map(() => '(?, ?)').join(', ')})`;
      } else addresses = addressesSql(ids, params);
      const where = filterSql(filter, params, agentTest);
      const rows = await db.all<Record<string, unknown>>(
        `SELECT ${lineColumns}, (${storedInContextTest}) AS stored_in_context FROM memory_entries e ` +
          `WHERE ${addresses} AND ${where} AND ${turnTest}`,
        params,
      );
      return rows.map((row) => rowToLine(row, 0, true, row.stored_in_context));
    },

    /**
     * Conversational turns (user and assistant entries, not tombstones) at the given addresses that pass
     * the filter: the neighbours a search lifts by the score of a matching turn next to them.
     */
    async turnsAt(
      filter: EntryFilter,
      ids: ReadonlyArray<{ sessionKey: string; memoryId: number }>,
    ): Promise<StoredEntry[]> {
      if (ids.length === 0) return [];
      const params: SqlValue[] = [];
      const where = `${filterSql(filter, params, agentTest)} AND ${addressesSql(ids, params)}`;
      const rows = await db.all<EntryRow>(
        `SELECT ${entryColumns} FROM memory_entries e WHERE ${where} ` +
          "AND e.kind = 'entry' AND e.role IN ('user', 'assistant') AND e.state <> 'tombstone'",
        params,
      );
      return rows.map(rowToEntry);
    },

    /**
     * Entries whose words contain `topic` as a phrase, newest written first (a `createdAtMs` given at
     * append time does not reorder them).
     */
    async topic(filter: EntryFilter, topic: string, limit: number): Promise<StoredEntry[]> {
      const params: SqlValue[] = [];
      if (dialect === 'sqlite') {
        const phrase = ftsPhrase(topic);
        if (!phrase) return [];
        await indexBeforeRead();
        // Only the entry's own words: the neighbour columns would match the turns around it too.
        params.push(`content : ${phrase}`);
        // Within one session key, FTS5 reads only the key's span of row ids: its matches newest first would
        // otherwise pass every newer match of the other sessions (all of them, for an old session and a
        // common word). A key's row ids grow with its MemoryIDs (`insertEntries`: ids past every id of the
        // key, ascending within a statement; AUTOINCREMENT row ids), so the span's ends are the rows of its
        // first and last MemoryID, one seek each into the address index.
        let span = '';
        if (filter.sessionKey !== undefined) {
          span =
            'AND memory_fts.rowid >= (SELECT id FROM memory_entries WHERE session_key = ? ORDER BY memory_id LIMIT 1) ' +
            'AND memory_fts.rowid <= (SELECT id FROM memory_entries WHERE session_key = ? ORDER BY memory_id DESC LIMIT 1) ';
          params.push(filter.sessionKey, filter.sessionKey);
        }
        const where = filterSql(filter, params, agentTest);
        // Newest written first, in FTS5's own rowid order: the scan stops after `limit` rows pass the
        // filter instead of reading and sorting every match of a common topic (FTS5 is the outer loop: the
        // agent's test is `agentTest`, which no index serves).
        const rows = await db.all<EntryRow>(
          `SELECT ${entryColumns} FROM memory_fts JOIN memory_entries e ON e.id = memory_fts.rowid ` +
            `WHERE memory_fts MATCH ? ${span}AND ${where} ORDER BY memory_fts.rowid DESC LIMIT ?`,
          [...params, limit],
        );
        return rows.map(rowToEntry);
      }
      const phrase = tsqueryPhrase(topic);
      if (!phrase) return [];
      params.push(phrase);
      const where = filterSql(filter, params, agentTest);
      const rows = await db.all<EntryRow>(
        `SELECT ${entryColumns} FROM memory_entries e WHERE e.search_vector @@ to_tsquery('english', ?) AND ${where} ` +
          'ORDER BY e.id DESC LIMIT ?',
        [...params, limit],
      );
      return rows.map(rowToEntry);
    },

    async insertVectors(
      rows: ReadonlyArray<{ rowId: number; agentId: string; vector: Float32Array }>,
      model: string,
    ): Promise<void> {
      if (rows.length === 0) return;
      await db.transaction(async (tx) => {
        for (const row of rows) {
          await tx.run(
            `INSERT INTO memory_vectors (entry_id, agent_id, model, dimensions, vector) VALUES (?, ?, ?, ?, ${dialect === 'postgres' ? '?::real[]' : '?'}) ` +
              'ON CONFLICT (entry_id, model) DO NOTHING',
            [row.rowId, row.agentId, model, row.vector.length, vectorParam(dialect, row.vector)],
          );
        }
      });
    },

    /** Row ids of entries (not tombstones) without a vector of `model`, oldest first. */
    async entriesWithoutVectors(model: string, limit: number): Promise<StoredEntry[]> {
      const rows = await db.all<EntryRow>(
        `SELECT ${entryColumns} FROM memory_entries e LEFT JOIN memory_vectors v ON v.entry_id = e.id AND v.model = ? ` +
          "WHERE v.entry_id IS NULL AND e.state <> 'tombstone' ORDER BY e.id LIMIT ?",
        [model, limit],
      );
      return rows.map(rowToEntry);
    },

    /** Nearest entries by cosine similarity (vectors are normalized, so the dot product). */
    async nearest(filter: EntryFilter, model: string, vector: Float32Array, limit: number) {
      const params: SqlValue[] = [model];
      const where = filterSql(filter, params, byAgentTest);
      const notTombstone = "e.state <> 'tombstone'";
      if (dialect === 'postgres') {
        const rows = await db.all<{ entry_id: number; similarity: number }>(
          'SELECT v.entry_id, (SELECT sum(a * b) FROM unnest(v.vector, ?::real[]) AS t(a, b)) AS similarity ' +
            'FROM memory_vectors v JOIN memory_entries e ON e.id = v.entry_id ' +
            `WHERE v.model = ? AND ${where} AND ${notTombstone} ORDER BY similarity DESC LIMIT ?`,
          [vectorParam(dialect, vector), ...params, limit],
        );
        return rows.map((row) => ({ rowId: Number(row.entry_id), similarity: Number(row.similarity) }));
      }
      if (options.sqliteVec) {
        const rows = await db.all<{ entry_id: number; distance: number }>(
          'SELECT v.entry_id, vec_distance_cosine(v.vector, ?) AS distance FROM memory_vectors v JOIN memory_entries e ON e.id = v.entry_id ' +
            `WHERE v.model = ? AND ${where} AND ${notTombstone} ORDER BY distance LIMIT ?`,
          [vectorParam(dialect, vector), ...params, limit],
        );
        return rows.map((row) => ({ rowId: Number(row.entry_id), similarity: 1 - Number(row.distance) }));
      }
      const rows = await db.all<{ entry_id: number; vector: unknown }>(
        `SELECT v.entry_id, v.vector FROM memory_vectors v JOIN memory_entries e ON e.id = v.entry_id WHERE v.model = ? AND ${where} AND ${notTombstone}`,
        params,
      );
      const scored: Array<{ rowId: number; similarity: number }> = [];
      for (const row of rows) {
        const other = vectorFromBlob(row.vector);
        if (!other || other.length !== vector.length) continue;
        let dot = 0;
        for (let index = 0; index < vector.length; index++) dot += vector[index]! * other[index]!;
        scored.push({ rowId: Number(row.entry_id), similarity: dot });
      }
      scored.sort((left, right) => right.similarity - left.similarity || left.rowId - right.rowId);
      return scored.slice(0, limit);
    },

    async history(
      sessionKey: string,
      options: { limit: number; beforeMemoryId?: number; includeArchived: boolean },
    ): Promise<StoredEntry[]> {
      const params: SqlValue[] = [sessionKey];
      let where =
        "e.session_key = ? AND e.kind = 'entry' AND e.role IN ('user', 'assistant') AND e.state <> 'tombstone'";
      if (!options.includeArchived) where += ' AND e.archived_at_ms IS NULL';
      if (options.beforeMemoryId !== undefined) {
        where += ' AND e.memory_id < ?';
        params.push(options.beforeMemoryId);
      }
      const rows = await db.all<EntryRow>(
        `SELECT ${entryColumns} FROM memory_entries e WHERE ${where} ORDER BY e.memory_id DESC LIMIT ?`,
        [...params, options.limit],
      );
      return rows.map(rowToEntry).reverse();
    },

    /**
     * Where the messages (user, assistant and system entries, not tool results) of every key sit, newest
     * first: at most `limit` rows before row `beforeRowId` (from the newest when undefined), and the row id
     * to read on from. It walks the primary key backwards, no other index: a page of a walk back through
     * time, which row ids follow. Content is not read.
     */
    async messageMarksBefore(
      beforeRowId: number | undefined,
      limit: number,
    ): Promise<{ marks: MessageMark[]; lastRowId: number | undefined }> {
      const params: SqlValue[] = [];
      // A tombstone (the mark of an evicted entry, role system) is no message.
      let where = "kind = 'entry' AND role IN ('user', 'assistant', 'system') AND state <> 'tombstone'";
      if (beforeRowId !== undefined) {
        where += ' AND id < ?';
        params.push(beforeRowId);
      }
      const rows = await db.all<
        Pick<
          EntryRow,
          'id' | 'session_key' | 'memory_id' | 'agent_id' | 'role' | 'metadata' | 'created_at_ms'
        >
      >(
        `SELECT id, session_key, memory_id, agent_id, role, metadata, created_at_ms FROM memory_entries WHERE ${where} ORDER BY id DESC LIMIT ?`,
        [...params, limit],
      );
      const marks = rows.map((row) => ({
        address: `${row.session_key}#${Number(row.memory_id)}`,
        sessionKey: row.session_key,
        agentId: row.agent_id,
        role: row.role as MessageMark['role'],
        ...(row.metadata ? { metadata: parseJsonObject(row.metadata) } : {}),
        createdAtMs: Number(row.created_at_ms),
      }));
      return { marks, lastRowId: rows.length > 0 ? Number(rows[rows.length - 1]!.id) : undefined };
    },

    /** Deletes everything stored for a key except its MemoryID counter (so ids are never reused). */
    async deleteSessionKey(sessionKey: string): Promise<number> {
      return db.transaction(async (tx) => {
        const deleted = await deleteEntries(tx, sessionKey, 'session_key = ?', [sessionKey]);
        await tx.run('DELETE FROM memory_snapshots WHERE session_key = ?', [sessionKey]);
        await tx.run('DELETE FROM memory_events WHERE session_key = ?', [sessionKey]);
        await tx.run('DELETE FROM memory_sessions WHERE session_key = ?', [sessionKey]);
        return deleted;
      });
    },

    async applyRetention(policy: {
      nowMs: number;
      snapshotsPerSession: number;
      snapshotMaxAgeMs: number;
      eventMaxAgeMs: number;
      archivedSessionsPerKey: number | null;
      archivedMaxAgeMs: number | null;
    }) {
      return db.transaction(async (tx) => {
        const byCount = await tx.run(
          'DELETE FROM memory_snapshots WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() OVER ' +
            '(PARTITION BY session_key ORDER BY created_at_ms DESC, id DESC) AS position FROM memory_snapshots) ranked WHERE position > ?)',
          [policy.snapshotsPerSession],
        );
        const byAge = await tx.run('DELETE FROM memory_snapshots WHERE created_at_ms < ?', [
          policy.nowMs - policy.snapshotMaxAgeMs,
        ]);
        const events = await tx.run('DELETE FROM memory_events WHERE created_at_ms < ?', [
          policy.nowMs - policy.eventMaxAgeMs,
        ]);
        type ExpiredRow = { session_id: string; session_key: string; first_memory_id: number | null };
        const expired = new Map<string, ExpiredRow>();
        const instanceColumns = 'session_id, session_key, first_memory_id';
        if (policy.archivedSessionsPerKey !== null) {
          const rows = await tx.all<ExpiredRow>(
            `SELECT ${instanceColumns} FROM (SELECT ${instanceColumns}, ROW_NUMBER() OVER (PARTITION BY session_key ORDER BY archived_at_ms DESC, session_id DESC) ` +
              'AS position FROM memory_sessions WHERE archived_at_ms IS NOT NULL) ranked WHERE position > ?',
            [policy.archivedSessionsPerKey],
          );
          for (const row of rows) expired.set(row.session_id, row);
        }
        if (policy.archivedMaxAgeMs !== null) {
          const rows = await tx.all<ExpiredRow>(
            `SELECT ${instanceColumns} FROM memory_sessions WHERE archived_at_ms IS NOT NULL AND archived_at_ms < ?`,
            [policy.nowMs - policy.archivedMaxAgeMs],
          );
          for (const row of rows) expired.set(row.session_id, row);
        }
        let entries = 0;
        for (const row of expired.values()) {
          if (row.first_memory_id !== null) {
            const instance = [row.session_key, row.first_memory_id, row.session_id];
            entries += await deleteEntries(tx, row.session_key, instanceRangeTest, instance);
          }
          await tx.run('DELETE FROM memory_snapshots WHERE session_id = ?', [row.session_id]);
          await tx.run('DELETE FROM memory_sessions WHERE session_id = ?', [row.session_id]);
        }
        return {
          snapshotsDeleted: byCount.changes + byAge.changes,
          eventsDeleted: events.changes,
          archivedSessionsDeleted: expired.size,
          entriesDeleted: entries,
        };
      });
    },
  };
}

export type LtmStore = ReturnType<typeof createLtmStore>;

export function byContextOrder(left: StoredEntry, right: StoredEntry): number {
  return left.orderKey - right.orderKey || left.memoryId - right.memoryId;
}
