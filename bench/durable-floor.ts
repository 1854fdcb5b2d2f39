// The durable floor of a chat turn: what a turn must write, written with better-sqlite3 alone into a file with
// agentd's own schema (its migrations, FTS5 triggers and indexes included), as
// two transactions — the user's message before the acknowledgement, the reply after the model — with agentd's
// pragmas (WAL, synchronous=NORMAL, 8,000-page autocheckpoint, the WAL synced in the background), and the
// full-text index taking the new entries in a batch of its own once agentd's `indexDelayMs` has passed since
// the first unindexed commit, as agentd's memory store does (migration 0027). Paired with the bare ws frames
// (bench/echo-floor.ts), it is the least a durable turn of this schema can cost: agentd's cost above it is its
// own code.
import { closeSync, fdatasync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { indexDelayMs, indexPendingSql, moveIndexMarkSql } from '../src/memory/ltm-store.js';
import { createSqliteDatabase, migrate } from '../src/store/index.js';

/**
 * Active entries a session keeps before a reply evicts its oldest, and how many stay after it: agentd's
 * default limit (64) and eviction target (`evictDownToRatio` 0.875 of it).
 */
const activeLimit = 64;
const activeAfterEviction = 56;

export interface FloorTurn {
  sessionKey: string;
  runId: string;
  text: string;
}

/**
 * Each call is one commit for every turn given, as agentd's group commit shares one between the turns that
 * arrive together.
 */
export interface DurableFloor {
  /** The users' messages, and the sessions' counts with their runs marked: before the acknowledgements. */
  accept(turns: ReadonlyArray<FloorTurn>): void;
  /** The replies, an eviction when one passes the limit with its event, an audit row, the runs' marks cleared. */
  finish(turns: ReadonlyArray<FloorTurn>): void;
  close(): void;
}

/**
 * `withoutFullText` leaves the full-text index out (no batches): the same writes without it, to show what
 * share of the floor that index is.
 */
export async function openDurableFloor(options: { withoutFullText?: boolean } = {}): Promise<DurableFloor> {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-bench-floor-'));
  const path = join(dir, 'floor.db');
  const schema = createSqliteDatabase({ path });
  await migrate(schema);
  await schema.close();

  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('wal_autocheckpoint = 8000');
  db.pragma('foreign_keys = ON');
  const insertSession = db.prepare(
    "INSERT INTO sessions (id, session_key, agent_id, status, created_at, last_active_at) VALUES (?, ?, 'main', 'active', ?, ?)",
  );
  const insertMemorySession = db.prepare(
    "INSERT INTO memory_sessions (session_id, session_key, agent_id, created_at_ms, last_active_ms) VALUES (?, ?, 'main', ?, ?)",
  );
  // The session's count and its run's mark in one statement: the least that writes both (agentd: two).
  const touchSession = db.prepare(
    'UPDATE sessions SET message_count = message_count + 1, last_active_at = MAX(last_active_at, ?), ' +
      'running_run_id = ?, running_started_at = ? WHERE id = ?',
  );
  const insertEntry = db.prepare(
    'INSERT INTO memory_entries (session_key, memory_id, session_id, agent_id, kind, role, state, related_to, order_key, ' +
      "content, tool_data, metadata, tokens, created_at_ms, updated_at_ms) VALUES (?, ?, ?, 'main', 'entry', ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)",
  );
  const evict = db.prepare(
    "UPDATE memory_entries SET state = 'evicted', updated_at_ms = ? WHERE session_key = ? AND memory_id IN (?)",
  );
  const insertEvent = db.prepare(
    'INSERT INTO memory_events (id, session_id, session_key, agent_id, kind, count, tokens_before, tokens_after, memory_ids, ' +
      "message, details, created_at_ms) VALUES (?, ?, ?, 'main', 'evicted', ?, ?, ?, ?, ?, ?, ?)",
  );
  const insertAudit = db.prepare(
    "INSERT INTO events (type, at, session_key, agent_id, work_item_id, run_id, data) VALUES ('chat.final', ?, ?, 'main', NULL, ?, ?)",
  );

  const indexPending = db.prepare(indexPendingSql);
  const moveIndexMark = db.prepare(moveIndexMarkSql);
  /** When the oldest commit the full-text index has not taken yet was made. */
  let unindexedSinceMs: number | undefined;
  const sessions = new Map<string, { id: string; nextId: number; active: number[] }>();
  const sessionOf = (sessionKey: string, now: number) => {
    let session = sessions.get(sessionKey);
    if (!session) {
      session = { id: `ses_${sessions.size}_${now}`, nextId: 1, active: [] };
      insertSession.run(session.id, sessionKey, now, now);
      insertMemorySession.run(session.id, sessionKey, now, now);
      sessions.set(sessionKey, session);
    }
    return session;
  };
  const append = (
    session: { id: string; nextId: number; active: number[] },
    sessionKey: string,
    role: string,
    state: string,
    text: string,
    metadata: string,
    now: number,
    relatedTo: number | null = null,
  ) => {
    // Ids from this process's own count: the floor has no other writer to look out for (agentd reads the
    // key's next free id in the commit).
    const memoryId = session.nextId++;
    const tokens = state === 'tombstone' ? 0 : Math.ceil(text.length / 4) + 4;
    insertEntry.run(
      sessionKey,
      memoryId,
      session.id,
      role,
      state,
      relatedTo,
      relatedTo ?? memoryId,
      text,
      metadata,
      tokens,
      now,
      now,
    );
    if (state === 'active') session.active.push(memoryId);
  };

  const acceptOne = ({ sessionKey, runId, text }: FloorTurn, now: number) => {
    const session = sessionOf(sessionKey, now);
    append(session, sessionKey, 'user', 'active', text, JSON.stringify({ runId }), now);
    touchSession.run(now, runId, now, session.id);
  };
  const finishOne = ({ sessionKey, runId, text }: FloorTurn, now: number) => {
    const session = sessionOf(sessionKey, now);
    append(session, sessionKey, 'assistant', 'active', text, JSON.stringify({ runId }), now);
    if (session.active.length > activeLimit) {
      const victims = session.active.splice(0, session.active.length - activeAfterEviction);
      for (const victim of victims) {
        evict.run(now, sessionKey, victim);
        append(
          session,
          sessionKey,
          'system',
          'tombstone',
          `[evicted:${victim}]`,
          '{"reason":"limit"}',
          now,
          victim,
        );
      }
      insertEvent.run(
        `mev_${runId}`,
        session.id,
        sessionKey,
        victims.length,
        600,
        588,
        JSON.stringify(victims),
        `evicted ${victims.length} oldest entries (#${victims[0]}–#${victims.at(-1)}) to long-term memory`,
        '{"reason":"limit"}',
        now,
      );
    }
    insertAudit.run(now, sessionKey, runId, JSON.stringify({ runId, status: 'done' }));
    touchSession.run(now, null, null, session.id);
  };
  // The WAL synced in the background while commits are written, as agentd's store does (walSyncIntervalMs).
  let walWritten = false;
  let walSyncing = false;
  const walHandle = openSync(`${path}-wal`, 'a');
  const walSync = setInterval(() => {
    if (!walWritten || walSyncing) return;
    walWritten = false;
    walSyncing = true;
    fdatasync(walHandle, () => {
      walSyncing = false;
    });
  }, 50);
  walSync.unref();
  const commit = (turns: ReadonlyArray<FloorTurn>, write: (turn: FloorTurn, now: number) => void) => {
    const now = Date.now();
    db.exec('BEGIN IMMEDIATE');
    for (const turn of turns) write(turn, now);
    db.exec('COMMIT');
    walWritten = true;
    if (options.withoutFullText) return;
    unindexedSinceMs ??= now;
    if (now - unindexedSinceMs < indexDelayMs) return;
    db.exec('BEGIN IMMEDIATE');
    indexPending.run();
    moveIndexMark.get();
    db.exec('COMMIT');
    unindexedSinceMs = undefined;
  };

  return {
    accept: (turns) => commit(turns, acceptOne),
    finish: (turns) => commit(turns, finishOne),
    close() {
      clearInterval(walSync);
      closeSync(walHandle);
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The floor's SQLite work alone, in this process without sockets: `turns` single-client turns (two commits
 * each) after as many to warm up, on 10 sessions; process CPU µs a turn.
 */
export async function floorCpuPerTurn(
  turns: number,
  options: { withoutFullText?: boolean } = {},
): Promise<number> {
  const floor = await openDurableFloor(options);
  try {
    const turn = (index: number): FloorTurn => ({
      sessionKey: `agent:main:floor-${index % 10}`,
      runId: `floor-${index}`,
      text: `turn ${index}: what do you remember about the trip we planned?`,
    });
    for (let index = 0; index < turns; index++) {
      floor.accept([turn(index)]);
      floor.finish([turn(index)]);
    }
    const before = process.cpuUsage();
    for (let index = turns; index < 2 * turns; index++) {
      floor.accept([turn(index)]);
      floor.finish([turn(index)]);
    }
    const used = process.cpuUsage(before);
    return (used.user + used.system) / turns;
  } finally {
    floor.close();
  }
}
