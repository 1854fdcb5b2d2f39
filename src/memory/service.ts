import type { ModelMessage } from '../model/index.js';
import type { MemoryConfig } from './config.js';
import './events.js';
import { createMemoryContext } from './service/context.js';
import { backfillEmbeddings, flushEmbeddings } from './service/embedding-indexer.js';
import { promptLineCacheSize } from './service/prompt-lines.js';
import {
  activeOf,
  appendBatch,
  evictEntries,
  pickOldest,
  pinEntries,
  publicCopy,
  statsOf,
  unload,
  withSession,
} from './service/ram.js';
import { getEntry, history, query, recall, recallForPrompt, search } from './service/recall.js';
import { archive, takeSnapshot } from './service/snapshots.js';
import { summarize } from './service/summarize.js';
import type {
  AlsoInTransaction,
  ArchiveOptions,
  MemoryServiceOptions,
  SummarizeOptions,
  SummarizeResult,
} from './service/types.js';
import { commit, enterDegraded, pendingCount } from './service/write-retry.js';
import type {
  AppendInput,
  ArchiveResult,
  HistoryEntry,
  HistoryOptions,
  MemoryEntry,
  MemoryItem,
  MessageMark,
  PinLease,
  QueryOptions,
  RecallOptions,
  SearchHit,
  SearchOptions,
  SessionRef,
  SessionStats,
  SnapshotResult,
} from './types.js';

export type {
  AlsoInTransaction,
  ArchiveOptions,
  MemoryServiceOptions,
  SummarizeOptions,
  SummarizeResult,
} from './service/types.js';

export interface MemoryStatus {
  degraded: boolean;
  degradedReason: string | undefined;
  /** Writes accepted while the database could not be written, waiting to be written through. */
  pendingWrites: number;
  loadedSessions: number;
  pendingEmbeddings: number;
  searchMode: 'fts' | 'hybrid';
  embeddingModel: string | undefined;
  /**
   * Committed entries automatic recall keeps for its newest-matches path (SQLite), and the characters they
   * hold (content or prompt line, at most `2 * recall.previewChars` each, of at most 4,096 entries).
   */
  promptLineCache: { lines: number; chars: number };
}

export interface MemoryService {
  readonly config: MemoryConfig;
  /**
   * Appends one entry; resolves after it is committed to the database, or, while the database cannot be
   * written, once it is queued in RAM to be written through when the database is back (`status().degraded`).
   * `also` commits in the same transaction (or is queued with the entry). With `requireCommit` it never
   * queues: while the database cannot be written it fails with STORE_UNAVAILABLE and appends nothing.
   */
  append(
    ref: SessionRef,
    input: AppendInput,
    also?: AlsoInTransaction,
    options?: { requireCommit?: boolean },
  ): Promise<MemoryEntry>;
  /** Appends several entries in one transaction (e.g. an assistant tool call and its results). */
  appendBatch(
    ref: SessionRef,
    inputs: ReadonlyArray<AppendInput>,
    also?: AlsoInTransaction,
  ): Promise<MemoryEntry[]>;
  /**
   * Runs a write in the session's write order: now, or after the writes queued while the database could not
   * be written (then it is queued too). Keeps records that belong with the transcript consistent with it.
   */
  persist(ref: SessionRef, write: AlsoInTransaction): Promise<void>;
  /** LOAD: the active entries in context order (copies). */
  load(ref: SessionRef): Promise<MemoryEntry[]>;
  /**
   * Loads and pins the active entries atomically; pinned entries are never evicted or summarized. The
   * lease's entries are frozen: one copy per entry, shared by every pin that hands it out. Its
   * `modelMessages()` is the conversation of all the active entries (as `toModelMessages(entries)` builds
   * it), each message frozen and made once per entry.
   */
  pin(
    ref: SessionRef,
    memoryIds?: ReadonlyArray<number>,
  ): Promise<
    PinLease & {
      entries: ReadonlyArray<Readonly<MemoryEntry>>;
      modelMessages(): Array<Readonly<ModelMessage>>;
    }
  >;
  evict(ref: SessionRef, options?: { count?: number; reason?: string }): Promise<number[]>;
  summarize(ref: SessionRef, options?: SummarizeOptions): Promise<SummarizeResult>;
  snapshot(ref: SessionRef, reason: string): Promise<SnapshotResult>;
  /** Ends a session instance: snapshot, mark its memory archived (still recallable), drop its RAM. */
  archive(sessionId: string, reason: string, options?: ArchiveOptions): Promise<ArchiveResult>;
  stats(ref: SessionRef): Promise<SessionStats>;
  /** RAM contexts currently loaded in this process. */
  loadedSessions(): SessionStats[];
  /** Drops an idle RAM context (it reloads from the database on next use). False when pinned or busy. */
  unload(sessionId: string): Promise<boolean>;
  recall(options: RecallOptions): Promise<MemoryItem[]>;
  query(options: QueryOptions): Promise<MemoryItem[]>;
  search(options: SearchOptions): Promise<SearchHit[]>;
  /** An entry by global address `<sessionKey>#<n>`. */
  get(address: string): Promise<MemoryEntry | undefined>;
  /** User and assistant entries of a key, oldest first (the last `limit` before `beforeMemoryId`). */
  history(sessionKey: string, options?: HistoryOptions): Promise<HistoryEntry[]>;
  /**
   * Where each message (user, assistant and system entries, not tool results) of every key made since
   * `sinceMs` sits, the last written first, at most `maxEntries`, without its content: what a start reads to
   * know the chat turns answered and the notes injected before it. From the database only: a start has
   * nothing queued in RAM.
   */
  recentMessageMarks(options: { sinceMs: number; maxEntries: number }): Promise<MessageMark[]>;
  /** A short block of relevant memories for the prompt, leaving out what is already in the context. */
  recallForPrompt(options: {
    agentId: string;
    sessionKey: string;
    query: string;
    maxTokens?: number;
  }): Promise<string>;
  /** Deletes all memory of a key (the MemoryID counter stays so ids are never reused). */
  deleteSessionKey(sessionKey: string): Promise<number>;
  applyRetention(): Promise<{
    snapshotsDeleted: number;
    eventsDeleted: number;
    archivedSessionsDeleted: number;
    entriesDeleted: number;
  }>;
  /** Waits until queued embeddings are stored. */
  flushEmbeddings(): Promise<void>;
  /** Queues entries that have no vector yet (e.g. written before a restart); returns how many. */
  backfillEmbeddings(limit?: number): Promise<number>;
  status(): MemoryStatus;
  /**
   * Another writer on the same database failed for want of space or I/O: memory goes degraded too (and
   * retries), so health and clients see one state of the store.
   */
  reportWriteFailure(error: unknown): void;
}

/** Rows a read of `recentMessageMarks` asks for at once. */
const recentMarksPage = 1_000;

/**
 * The memory service: per-session RAM contexts with stable MemoryIDs, written through to the database,
 * and long-term memory queries over everything ever written. See docs/memory.md.
 *
 * Every mutation and every LOAD of a session runs under that session's FIFO lock (a keyed mutex), so
 * concurrent writers (chat turn, memory manager, heartbeat) are applied one at a time in arrival order.
 * Summarizing calls the model outside the lock: the entries being summarized are marked busy (nothing
 * else touches them) while appends go on.
 *
 * The work is done by step modules in `service/`, functions of one `MemoryContext`: the RAM context
 * (`ram.ts`), the write-retry queue (`write-retry.ts`), recall and search (`recall.ts`), the embedding
 * indexer (`embedding-indexer.ts`), snapshots and archiving (`snapshots.ts`) and summarizing
 * (`summarize.ts`). This function builds the context and binds them.
 */
export function createMemoryService(options: MemoryServiceOptions): MemoryService {
  const ctx = createMemoryContext(options);
  const { config, clock, logger, embedder } = ctx;

  return {
    config,
    append: async (ref, input, also, appendOptions) =>
      (await appendBatch(ctx, ref, [input], also, appendOptions?.requireCommit))[0]!,
    persist: (ref, write) =>
      withSession(ctx, ref, async (ram) => {
        await commit(ctx, ram, 0, () => [], write);
      }),
    appendBatch: (ref, inputs, also) => appendBatch(ctx, ref, inputs, also),
    load: (ref) => withSession(ctx, ref, async (ram) => activeOf(ram).map(publicCopy)),
    pin: (ref, memoryIds) => withSession(ctx, ref, async (ram) => pinEntries(ctx, ram, memoryIds)),
    evict: (ref, evictOptions = {}) =>
      withSession(ctx, ref, async (ram) => {
        const count = Math.max(1, Math.floor(evictOptions.count ?? 1));
        const victims = pickOldest(ram, (takenCount) => takenCount < count, 1);
        return evictEntries(ctx, ram, victims, evictOptions.reason ?? 'requested');
      }),
    summarize: (ref, summarizeOptions) => summarize(ctx, ref, summarizeOptions),
    snapshot: (ref, reason) => withSession(ctx, ref, async (ram) => takeSnapshot(ctx, ram, reason)),
    archive: (sessionId, reason, archiveOptions) => archive(ctx, sessionId, reason, archiveOptions),
    stats: (ref) => withSession(ctx, ref, async (ram) => statsOf(ram)),
    loadedSessions: () => [...ctx.sessions.values()].map(statsOf),
    unload: (sessionId) => unload(ctx, sessionId),
    recall: (recallOptions) => recall(ctx, recallOptions),
    query: (queryOptions) => query(ctx, queryOptions),
    search: (searchOptions) => search(ctx, searchOptions),
    get: (address) => getEntry(ctx, address),
    history: (sessionKey, historyOptions) => history(ctx, sessionKey, historyOptions),
    async recentMessageMarks({ sinceMs, maxEntries }) {
      const found: MessageMark[] = [];
      let before: number | undefined;
      while (found.length < maxEntries) {
        const { marks, lastRowId } = await ctx.ltm.messageMarksBefore(
          before,
          Math.min(recentMarksPage, maxEntries - found.length),
        );
        // Row ids follow time, but not strictly: entries queued in RAM while the database refused writes
        // are written later with the time they were made. So the walk ends at a page with nothing in the
        // window, not at the first older row.
        let inWindow = false;
        for (const mark of marks) {
          if (mark.createdAtMs < sinceMs) continue;
          inWindow = true;
          found.push(mark);
        }
        if (!inWindow) return found;
        before = lastRowId;
      }
      return found;
    },
    recallForPrompt: (promptOptions) => recallForPrompt(ctx, promptOptions),
    async deleteSessionKey(sessionKey) {
      const sessionIds = new Set(ctx.sessions.ofKey(sessionKey).map((ram) => ram.ref.sessionId));
      for (const [sessionId, pending] of ctx.writes.pendingWrites)
        if (pending.ref.sessionKey === sessionKey) sessionIds.add(sessionId);
      for (const sessionId of sessionIds) {
        // The key's writes still queued from a full disk go too: written through after the delete, they
        // would bring back the transcript the caller was told is gone.
        await ctx.mutex.run(sessionId, async () => {
          ctx.sessions.delete(sessionId);
          const dropped = ctx.writes.pendingWrites.get(sessionId)?.writes.length ?? 0;
          if (dropped === 0) return;
          ctx.writes.pendingWrites.delete(sessionId);
          logger.warn({ sessionId, dropped }, 'queued memory writes of a deleted session dropped');
        });
      }
      return ctx.ltm.deleteSessionKey(sessionKey);
    },
    async applyRetention() {
      const result = await ctx.ltm.applyRetention({ nowMs: clock.now(), ...config.retention });
      if (result.snapshotsDeleted + result.eventsDeleted + result.archivedSessionsDeleted > 0) {
        logger.info(result, 'memory retention applied');
      }
      return result;
    },
    flushEmbeddings: () => flushEmbeddings(ctx),
    backfillEmbeddings: (limit) => backfillEmbeddings(ctx, limit),
    reportWriteFailure: (error) => enterDegraded(ctx, error),
    status: () => ({
      degraded: ctx.writes.degradedReason !== undefined,
      degradedReason: ctx.writes.degradedReason,
      pendingWrites: pendingCount(ctx),
      loadedSessions: ctx.sessions.size,
      pendingEmbeddings: ctx.embeddings.pending.length,
      searchMode: embedder ? 'hybrid' : 'fts',
      embeddingModel: embedder?.model,
      promptLineCache: promptLineCacheSize(ctx),
    }),
  };
}
