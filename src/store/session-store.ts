import { z } from 'zod';
import type { Clock, IdGenerator } from '../util/index.js';
import {
  clipText,
  createIdGenerator,
  decodeJson,
  ErrorCodes,
  rememberNewest,
  SystemError,
  systemClock,
  UserInputError,
} from '../util/index.js';
import type { SqlDatabase, SqlExecutor, SqlValue } from './database.js';

export type SessionStatus = 'active' | 'archived';

/**
 * A run was to start on a session instance that is no longer active: another connection (a command-line
 * process on the same SQLite file) archived or deleted it since this store last read the key. Nothing was
 * written; the key's active instance is to be looked up again (`activeId` without `confirmedByCommit`).
 */
export class SessionEndedError extends SystemError {
  constructor(readonly sessionId: string) {
    super({
      code: ErrorCodes.conflict,
      message: `session ${sessionId} is no longer active`,
      retryable: true,
    });
  }
}

/**
 * One instance of a conversation. A session key (`agent:<agentId>:<key>`) names the conversation; archiving
 * (e.g. `/new`) ends the current instance, and the next message under the same key starts a new one.
 */
export interface SessionRecord {
  /** The instance id. */
  id: string;
  sessionKey: string;
  agentId: string;
  status: SessionStatus;
  title: string | null;
  summary: string | null;
  metadata: Record<string, unknown>;
  messageCount: number;
  createdAt: number;
  lastActiveAt: number;
  archivedAt: number | null;
  archiveReason: string | null;
}

export interface ListSessionsOptions {
  agentId?: string;
  includeArchived?: boolean;
  /** Default 100, at most 1000. */
  limit?: number;
  offset?: number;
}

export interface SessionPatch {
  title?: string | null;
  summary?: string | null;
  /** Replaces the whole metadata object. */
  metadata?: Record<string, unknown>;
}

/**
 * Activity recorded in the statement of another write to the session's row, as `touch` would record it: a
 * chat turn's commits change the row anyway, and one statement a commit is cheaper than two.
 */
export interface SessionActivity {
  messageDelta: number;
  at: number;
}

export interface SessionStore {
  /** The active instance for the key, created when there is none. Safe under concurrent callers. */
  ensureActive(sessionKey: string, agentId: string): Promise<SessionRecord>;
  /**
   * The id of `ensureActive`'s instance. Where it can be told when another connection may have ended a
   * session (`endsVersion`: SQLite's `data_version`, a LISTEN on Postgres), the id this store last read for
   * the key is reused without a statement until then or until this store archives or deletes the key: a chat
   * turn asks on every message. With `confirmedByCommit`, on SQLite, the id last read is reused without
   * asking `data_version` either: for a caller whose commit marks a run with `markRunning`, which refuses an
   * instance no longer active (SessionEndedError) and so checks the id in the commit that uses it.
   */
  activeId(sessionKey: string, agentId: string, options?: { confirmedByCommit?: boolean }): Promise<string>;
  getActive(sessionKey: string): Promise<SessionRecord | undefined>;
  getById(id: string): Promise<SessionRecord | undefined>;
  /** Most recently active first. */
  list(options?: ListSessionsOptions): Promise<SessionRecord[]>;
  /**
   * Records activity: adds `messageDelta` messages and moves `lastActiveAt` forward (never back). False when
   * there is no such session. (It runs in every chat commit; the record is not read back.)
   */
  touch(id: string, options?: { messageDelta?: number; at?: number }, tx?: SqlExecutor): Promise<boolean>;
  patch(id: string, patch: SessionPatch): Promise<SessionRecord | undefined>;
  /** Archives the active instance of the key; undefined when none is active. With `tx`, in that transaction. */
  archive(sessionKey: string, reason: string, tx?: SqlExecutor): Promise<SessionRecord | undefined>;
  /** Removes every instance of the key, archived ones included; returns how many. */
  delete(sessionKey: string): Promise<number>;
  /**
   * Marks the chat run in progress on the session's row (one per session: a key runs one turn at a time),
   * with `tx` in that transaction (the one that appends the run's message). On SQLite an instance no longer
   * active is refused with SessionEndedError, which rolls that transaction back (`activeId`'s
   * `confirmedByCommit`); on Postgres, where a LISTEN tells the store of ended sessions and the commit is
   * sent as one statement, the row is marked as it is.
   */
  markRunning(
    id: string,
    run: { runId: string; startedAt: number; owner?: string },
    activity?: SessionActivity,
    tx?: SqlExecutor,
  ): Promise<void>;
  /**
   * Clears the mark of `runId` on the key's rows (the instance may have been archived meanwhile). With
   * `activity`, on the row of `activity.sessionId` only, which that same statement also touches.
   */
  markEnded(
    sessionKey: string,
    runId: string,
    activity?: SessionActivity & { sessionId: string },
    tx?: SqlExecutor,
  ): Promise<void>;
  /**
   * Clears the mark of a run that ended without writing a reply (it failed, answered nothing, or was stopped
   * before it said anything) and keeps how it ended on the same row, with the row's last 4 such runs: the
   * transcript holds only its user message, which after a restart cannot tell those ends apart
   * (`listUnrepliedRuns`). A run no longer marked is left as it is.
   */
  markEndedWithoutReply(run: UnrepliedRun, tx?: SqlExecutor): Promise<void>;
  /** Runs still marked: at a start, the ones a stop interrupted. */
  listRunning(): Promise<RunningSessionRun[]>;
  /** The last runs of each session row that ended without a reply (`markEndedWithoutReply`). */
  listUnrepliedRuns(): Promise<UnrepliedRun[]>;
}

/** How a chat run that wrote no reply ended, as kept on its session's row (`markEndedWithoutReply`). */
export interface UnrepliedRun {
  runId: string;
  sessionKey: string;
  /** The run's status: `completed` for an empty answer, `aborted`, `error` and the engage loop's others. */
  status: string;
  error?: { code: string; message: string; retryable: boolean };
  endedAt: number;
}

/**
 * The row's JSON of its last runs that ended without a reply (the key is the row's own column), oldest first.
 * Version 1.
 */
const storedUnrepliedRuns = z.object({
  v: z.literal(1),
  runs: z.array(
    z.object({
      runId: z.string(),
      status: z.string(),
      error: z.object({ code: z.string(), message: z.string(), retryable: z.boolean() }).optional(),
      endedAt: z.number(),
    }),
  ),
});
type StoredUnrepliedRun = z.infer<typeof storedUnrepliedRuns>['runs'][number];

/**
 * Unreplied runs a session row keeps, the newest, and how much of an error each keeps: every chat turn
 * rewrites its session's row (its message count), so the row must stay within its B-tree page (about 4 KiB
 * of payload): past that SQLite moves the rest to overflow pages, which each such rewrite writes again. Four
 * runs of a few hundred bytes each cover a client retrying its last messages after a restart.
 */
const unrepliedRunsKept = 4;
const unrepliedErrorCodeMaxChars = 64;
const unrepliedErrorMessageMaxChars = 200;
// What a row of four clipped runs never reaches; a longer one was not written by this store.
const unrepliedRunsMaxBytes = 64 * 1024;

/**
 * The runs of a row's `unreplied_runs`. One that does not decode says nothing of its runs, which then stay of
 * unknown outcome, as they were before this column: neither a start nor a run's end fails for it.
 */
function decodeUnreplied(text: string | null, sessionKey: string): StoredUnrepliedRun[] | undefined {
  if (text === null) return undefined;
  try {
    return decodeJson(text, storedUnrepliedRuns, {
      what: `the unreplied runs of session ${sessionKey}`,
      maxBytes: unrepliedRunsMaxBytes,
    }).runs;
  } catch {
    return undefined;
  }
}

/** A chat run marked in progress on its session's row. */
export interface RunningSessionRun {
  runId: string;
  sessionKey: string;
  agentId: string;
  startedAt: number;
  /** The process that marked it (`openOwner`'s name); none from an agentd before migration 0049. */
  owner?: string;
}

export interface CreateSessionStoreOptions {
  clock?: Clock;
  idGenerator?: IdGenerator;
  /**
   * `lastActiveAt` is written at most this often per session by one store (default 1,000 ms; 0 writes every
   * touch). Every chat commit touches its session; moving `lastActiveAt` rewrites the row's entries in both
   * activity indexes, while the message count alone changes only the row.
   */
  activityResolutionMs?: number;
  /**
   * A number that changes whenever a connection other than this store's may have archived or deleted a
   * session, undefined where that cannot be known (then `activeId` reads the table on every call). Default:
   * the database's `readVersion` (SQLite's `data_version`); on Postgres the store's LISTEN connection
   * (`createStore`).
   */
  endsVersion?: () => number | undefined;
}

/** Sessions one store's caches remember (activity written, active ids); past it the oldest are forgotten. */
const maxRememberedSessions = 10_000;

/** Sets `key` as the newest entry of `map`, forgetting the oldest once there are too many. */
function remember<Value>(map: Map<string, Value>, key: string, value: Value): void {
  rememberNewest(map, key, value, maxRememberedSessions);
}

const maxSessionKeyLength = 512;
const maxListLimit = 1_000;

/** `agent:<agentId>:<key>`, the session key form shared with OpenClaw clients. */
export function formatSessionKey(agentId: string, key: string): string {
  return `agent:${agentId}:${key}`;
}

/** Splits `agent:<agentId>:<key>`; undefined for keys not in that form. */
export function parseSessionKey(sessionKey: string): { agentId: string; key: string } | undefined {
  if (!sessionKey.startsWith('agent:')) return undefined;
  const separator = sessionKey.indexOf(':', 6);
  if (separator <= 6 || separator === sessionKey.length - 1) return undefined;
  return { agentId: sessionKey.slice(6, separator), key: sessionKey.slice(separator + 1) };
}

interface SessionRow {
  id: string;
  session_key: string;
  agent_id: string;
  status: SessionStatus;
  title: string | null;
  summary: string | null;
  metadata: string;
  message_count: number;
  created_at: number;
  last_active_at: number;
  archived_at: number | null;
  archive_reason: string | null;
}

function parseMetadata(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

function toRecord(row: SessionRow): SessionRecord {
  return {
    id: row.id,
    sessionKey: row.session_key,
    agentId: row.agent_id,
    status: row.status,
    title: row.title,
    summary: row.summary,
    metadata: parseMetadata(row.metadata),
    messageCount: Number(row.message_count),
    createdAt: Number(row.created_at),
    lastActiveAt: Number(row.last_active_at),
    archivedAt: row.archived_at === null ? null : Number(row.archived_at),
    archiveReason: row.archive_reason,
  };
}

function validateKey(sessionKey: string, agentId?: string): void {
  if (sessionKey.length === 0 || sessionKey.length > maxSessionKeyLength) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `a session key must have 1 to ${maxSessionKeyLength} characters`,
    });
  }
  if (agentId === undefined) return;
  if (agentId.length === 0)
    throw new UserInputError({ code: ErrorCodes.invalidRequest, message: 'agentId is empty' });
  const parsed = parseSessionKey(sessionKey);
  if (parsed && parsed.agentId !== agentId) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `session key ${sessionKey} belongs to agent ${parsed.agentId}, not ${agentId}`,
    });
  }
}

const columns =
  'id, session_key, agent_id, status, title, summary, metadata, message_count, created_at, last_active_at, archived_at, archive_reason';

export function createSessionStore(db: SqlDatabase, options: CreateSessionStoreOptions = {}): SessionStore {
  const clock = options.clock ?? systemClock;
  const newId = options.idGenerator ?? createIdGenerator({ now: () => clock.now() });
  // SQLite's two-argument MAX is scalar; Postgres spells it GREATEST.
  const greatest = db.dialect === 'postgres' ? 'GREATEST' : 'MAX';
  /** Whether markRunning refuses an instance no longer active (SQLite; see SessionStore.markRunning). */
  const refusesEnded = db.dialect === 'sqlite';
  const activityResolutionMs = Math.max(0, options.activityResolutionMs ?? 1_000);
  const endsVersion = options.endsVersion ?? (() => db.readVersion?.());
  /** When this store last moved each session's `lastActiveAt`, by session id, least recent first. */
  const activityWrittenAt = new Map<string, number>();

  const getActive = async (sessionKey: string) => {
    const row = await db.get<SessionRow>(
      `SELECT ${columns} FROM sessions WHERE session_key = ? AND status = 'active'`,
      [sessionKey],
    );
    return row ? toRecord(row) : undefined;
  };

  /**
   * The assignments that record activity on a row: the message count, and the last activity unless this
   * store moved it less than `activityResolutionMs` ago (or later than `at`), which keeps the activity
   * indexes out of most commits. `written` remembers the move once the statement changed the row.
   */
  const activitySet = (id: string, activity: SessionActivity) => {
    const delta = Math.trunc(activity.messageDelta);
    const written = activityWrittenAt.get(id);
    if (written !== undefined && activity.at - written < activityResolutionMs)
      return { set: 'message_count = message_count + ?', params: [delta], written: () => {} };
    return {
      set: `message_count = message_count + ?, last_active_at = ${greatest}(last_active_at, ?)`,
      params: [delta, activity.at],
      written: () => remember(activityWrittenAt, id, activity.at),
    };
  };

  const activeIds = new Map<string, string>();
  let activeIdsVersion: number | undefined;
  /**
   * Archives and deletes begun. A read that began before one may have read the id it ends, and is not kept;
   * one that begins after it reads after its statement, which runs or queues first on the connection.
   */
  let keyWrites = 0;
  const endingKeys = <T>(write: () => Promise<T>): Promise<T> => {
    keyWrites++;
    activeIds.clear();
    return write();
  };

  const store: SessionStore = {
    async activeId(sessionKey, agentId, options) {
      // A kept id the caller's commit checks needs no PRAGMA data_version, whose read lock taken and dropped
      // is two of a SQLite chat turn's sixteen lock calls.
      if (!(options?.confirmedByCommit === true && refusesEnded && activeIds.has(sessionKey))) {
        const version = endsVersion();
        if (version === undefined) return (await store.ensureActive(sessionKey, agentId)).id;
        if (version !== activeIdsVersion) {
          activeIds.clear();
          activeIdsVersion = version;
        }
      }
      validateKey(sessionKey, agentId);
      const known = activeIds.get(sessionKey);
      if (known !== undefined) return known;
      const writesBefore = keyWrites;
      const { id } = await store.ensureActive(sessionKey, agentId);
      if (keyWrites === writesBefore && endsVersion() === activeIdsVersion)
        remember(activeIds, sessionKey, id);
      return id;
    },

    async ensureActive(sessionKey, agentId) {
      validateKey(sessionKey, agentId);
      const existing = await getActive(sessionKey);
      if (existing) return existing;
      const now = clock.now();
      // The partial unique index decides races: the loser inserts nothing and reads the winner's row.
      const inserted = await db.get<SessionRow>(
        `INSERT INTO sessions (id, session_key, agent_id, status, metadata, message_count, created_at, last_active_at)
         VALUES (?, ?, ?, 'active', '{}', 0, ?, ?)
         ON CONFLICT (session_key) WHERE status = 'active' DO NOTHING
         RETURNING ${columns}`,
        [newId('ses'), sessionKey, agentId, now, now],
      );
      if (inserted) return toRecord(inserted);
      const winner = await getActive(sessionKey);
      if (winner) return winner;
      // The winner was archived between our insert and read; start over.
      return store.ensureActive(sessionKey, agentId);
    },

    getActive: async (sessionKey) => getActive(sessionKey),

    async getById(id) {
      const row = await db.get<SessionRow>(`SELECT ${columns} FROM sessions WHERE id = ?`, [id]);
      return row ? toRecord(row) : undefined;
    },

    async list(listOptions = {}) {
      const conditions: string[] = [];
      const params: SqlValue[] = [];
      if (listOptions.agentId !== undefined) {
        conditions.push('agent_id = ?');
        params.push(listOptions.agentId);
      }
      if (!listOptions.includeArchived) conditions.push("status = 'active'");
      const limit = Math.min(Math.max(1, Math.floor(listOptions.limit ?? 100)), maxListLimit);
      const offset = Math.max(0, Math.floor(listOptions.offset ?? 0));
      const where = conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
      const rows = await db.all<SessionRow>(
        `SELECT ${columns} FROM sessions ${where} ORDER BY last_active_at DESC, id DESC LIMIT ? OFFSET ?`,
        [...params, limit, offset],
      );
      return rows.map(toRecord);
    },

    async touch(id, touchOptions = {}, tx) {
      const activity = activitySet(id, {
        messageDelta: Math.trunc(touchOptions.messageDelta ?? 0),
        at: touchOptions.at ?? clock.now(),
      });
      const result = await (tx ?? db).run(`UPDATE sessions SET ${activity.set} WHERE id = ?`, [
        ...activity.params,
        id,
      ]);
      if (result.changes === 0) return false;
      activity.written();
      return true;
    },

    async patch(id, patch) {
      const assignments: string[] = [];
      const params: SqlValue[] = [];
      if (patch.title !== undefined) {
        assignments.push('title = ?');
        params.push(patch.title);
      }
      if (patch.summary !== undefined) {
        assignments.push('summary = ?');
        params.push(patch.summary);
      }
      if (patch.metadata !== undefined) {
        assignments.push('metadata = ?');
        params.push(JSON.stringify(patch.metadata));
      }
      if (assignments.length === 0) return store.getById(id);
      const row = await db.get<SessionRow>(
        `UPDATE sessions SET ${assignments.join(', ')} WHERE id = ? RETURNING ${columns}`,
        [...params, id],
      );
      return row ? toRecord(row) : undefined;
    },

    archive: (sessionKey, reason, tx) =>
      endingKeys(async () => {
        const row = await (tx ?? db).get<SessionRow>(
          `UPDATE sessions SET status = 'archived', archived_at = ?, archive_reason = ?
         WHERE session_key = ? AND status = 'active' RETURNING ${columns}`,
          [clock.now(), reason, sessionKey],
        );
        return row ? toRecord(row) : undefined;
      }),

    delete: (sessionKey) =>
      endingKeys(async () => {
        const result = await db.run('DELETE FROM sessions WHERE session_key = ?', [sessionKey]);
        return result.changes;
      }),

    async markRunning(id, run, activity, tx) {
      const counted = activity ? activitySet(id, activity) : undefined;
      const result = await (tx ?? db).run(
        `UPDATE sessions SET ${counted ? `${counted.set}, ` : ''}running_run_id = ?, running_started_at = ?, running_owner = ? WHERE id = ?${refusesEnded ? " AND status = 'active'" : ''}`,
        [...(counted?.params ?? []), run.runId, run.startedAt, run.owner ?? null, id],
      );
      if (result.changes > 0) counted?.written();
      else if (refusesEnded) throw new SessionEndedError(id);
    },

    async markEnded(sessionKey, runId, activity, tx) {
      const executor = tx ?? db;
      if (!activity) {
        await executor.run(
          'UPDATE sessions SET running_run_id = NULL, running_started_at = NULL WHERE session_key = ? AND running_run_id = ?',
          [sessionKey, runId],
        );
        return;
      }
      const counted = activitySet(activity.sessionId, activity);
      // Every assignment reads the row as it was, so both CASEs see the mark before it is cleared.
      const result = await executor.run(
        `UPDATE sessions SET ${counted.set}, ` +
          'running_started_at = CASE WHEN running_run_id = ? THEN NULL ELSE running_started_at END, ' +
          'running_run_id = CASE WHEN running_run_id = ? THEN NULL ELSE running_run_id END ' +
          'WHERE id = ? AND session_key = ?',
        [...counted.params, runId, runId, activity.sessionId, sessionKey],
      );
      if (result.changes > 0) counted.written();
    },

    async markEndedWithoutReply(run, tx) {
      const executor = tx ?? db;
      const row = await executor.get<{ unreplied_runs: string | null }>(
        'SELECT unreplied_runs FROM sessions WHERE session_key = ? AND running_run_id = ?',
        [run.sessionKey, run.runId],
      );
      if (!row) return;
      const kept = [...(decodeUnreplied(row.unreplied_runs, run.sessionKey) ?? [])];
      kept.push({
        runId: run.runId,
        status: run.status,
        ...(run.error
          ? {
              error: {
                code: run.error.code.slice(0, unrepliedErrorCodeMaxChars),
                message: clipText(run.error.message, unrepliedErrorMessageMaxChars),
                retryable: run.error.retryable,
              },
            }
          : {}),
        endedAt: run.endedAt,
      });
      await executor.run(
        'UPDATE sessions SET running_run_id = NULL, running_started_at = NULL, unreplied_runs = ? WHERE session_key = ? AND running_run_id = ?',
        [JSON.stringify({ v: 1, runs: kept.slice(-unrepliedRunsKept) }), run.sessionKey, run.runId],
      );
    },

    async listUnrepliedRuns() {
      // Read at a start only, as listRunning: a scan of the table, no index written for it.
      const rows = await db.all<{ session_key: string; unreplied_runs: string }>(
        'SELECT session_key, unreplied_runs FROM sessions WHERE unreplied_runs IS NOT NULL',
      );
      return rows.flatMap((row) =>
        (decodeUnreplied(row.unreplied_runs, row.session_key) ?? []).map((run) => ({
          ...run,
          sessionKey: row.session_key,
        })),
      );
    },

    async listRunning() {
      // Read at a start only: a scan of the table, so no index is written on every turn for it.
      const rows = await db.all<{
        running_run_id: string;
        session_key: string;
        agent_id: string;
        running_started_at: number;
        running_owner: string | null;
      }>(
        'SELECT running_run_id, session_key, agent_id, running_started_at, running_owner FROM sessions WHERE running_run_id IS NOT NULL',
      );
      return rows.map((row) => ({
        runId: row.running_run_id,
        sessionKey: row.session_key,
        agentId: row.agent_id,
        startedAt: Number(row.running_started_at),
        ...(row.running_owner === null ? {} : { owner: row.running_owner }),
      }));
    },
  };
  return store;
}
