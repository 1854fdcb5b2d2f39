import { createRequire } from 'node:module';
import { z } from 'zod';
import type { Bus } from '../bus/index.js';
import type { LanguageModel } from '../model/index.js';
import type { SqlDatabase, SqlExecutor } from '../store/index.js';
import {
  type Clock,
  coerceError,
  createIdGenerator,
  createKeyedMutex,
  ErrorCodes,
  formatZodIssues,
  type IdGenerator,
  type Logger,
  silentLogger,
  systemClock,
  UserInputError,
} from '../util/index.js';
import { type MemoryConfig, type MemoryConfigInput, memoryConfigSchema } from './config.js';
import { createHashingEmbedder, createOpenAiEmbedder, type EmbeddingProvider } from './embeddings.js';
import './events.js';
import { parseMemoryAddress, toMemoryItem } from './items.js';
import {
  byContextOrder,
  createLtmStore,
  type EntryFilter,
  rowToEntry,
  type StoredEntry,
} from './ltm-store.js';
import { createSummarizer, type Summarizer } from './summarizer.js';
import { estimateTokens, queryTerms, truncateText, wordTokens } from './text.js';
import type {
  AppendInput,
  ArchiveResult,
  HistoryEntry,
  HistoryOptions,
  MemoryEntry,
  MemoryEventPayload,
  MemoryItem,
  PinLease,
  QueryOptions,
  RecallOptions,
  SearchHit,
  SearchOptions,
  SessionRef,
  SessionStats,
  SnapshotResult,
} from './types.js';

export interface MemoryServiceOptions {
  db: SqlDatabase;
  bus: Bus;
  /** Writes summaries; without it (or when it fails) summaries are extractive. */
  model?: LanguageModel;
  clock?: Clock;
  idGenerator?: IdGenerator;
  logger?: Logger;
  config?: MemoryConfigInput;
  /** Overrides `config.embeddings` (tests pass the hashing embedder here). */
  embedder?: EmbeddingProvider;
  /** Where `config.embeddings.apiKeyEnv` is looked up; defaults to `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
  fetch?: typeof globalThis.fetch;
}

/** Runs inside the transaction that commits an append; statements on the same database join it. */
export type AlsoInTransaction = () => Promise<void>;

export interface SummarizeOptions {
  /** Most entries folded into the summary; default `config.summarizeBatch`. */
  maxEntries?: number;
  /** Active entries that must stay untouched at the end of the context; default 1. */
  keepLatest?: number;
  reason?: string;
  signal?: AbortSignal;
}

export interface SummarizeResult {
  summary: MemoryEntry | undefined;
  summarizedIds: number[];
  method: 'model' | 'extractive' | undefined;
  /** Set when nothing was summarized. */
  skipped?: 'nothing-to-summarize' | 'pinned' | 'session-gone';
}

export interface MemoryStatus {
  degraded: boolean;
  degradedReason: string | undefined;
  /** Writes accepted while the database could not be written, waiting to be written through. */
  pendingWrites: number;
  loadedSessions: number;
  pendingEmbeddings: number;
  searchMode: 'fts' | 'hybrid';
  embeddingModel: string | undefined;
}

export interface MemoryService {
  readonly config: MemoryConfig;
  /**
   * Appends one entry; resolves after it is committed to the database, or, while the database cannot be
   * written, once it is queued in RAM to be written through when the database is back (`status().degraded`).
   * `also` commits in the same transaction (or is queued with the entry).
   */
  append(ref: SessionRef, input: AppendInput, also?: AlsoInTransaction): Promise<MemoryEntry>;
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
  /** Loads and pins the active entries atomically; pinned entries are never evicted or summarized. */
  pin(ref: SessionRef, memoryIds?: ReadonlyArray<number>): Promise<PinLease & { entries: MemoryEntry[] }>;
  evict(ref: SessionRef, options?: { count?: number; reason?: string }): Promise<number[]>;
  summarize(ref: SessionRef, options?: SummarizeOptions): Promise<SummarizeResult>;
  snapshot(ref: SessionRef, reason: string): Promise<SnapshotResult>;
  /** Ends a session instance: snapshot, mark its memory archived (still recallable), drop its RAM. */
  archive(sessionId: string, reason: string): Promise<ArchiveResult>;
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

const maxContentChars = 1_000_000;

const toolCallSchema = z.object({
  id: z.string().min(1).max(512),
  name: z.string().min(1).max(256),
  arguments: z.record(z.string(), z.unknown()),
});
const metadataSchema = z.record(z.string(), z.unknown()).optional();
const appendInputSchema = z.discriminatedUnion('role', [
  z.object({
    role: z.enum(['user', 'system']),
    content: z.string().max(maxContentChars),
    metadata: metadataSchema,
    createdAtMs: z.number().int().nonnegative().optional(),
  }),
  z.object({
    role: z.literal('assistant'),
    content: z.string().max(maxContentChars),
    toolCalls: z.array(toolCallSchema).max(256).optional(),
    metadata: metadataSchema,
    createdAtMs: z.number().int().nonnegative().optional(),
  }),
  z.object({
    role: z.literal('tool'),
    content: z.string().max(maxContentChars),
    toolCallId: z.string().min(1).max(512),
    toolName: z.string().min(1).max(256),
    isError: z.boolean().optional(),
    metadata: metadataSchema,
    createdAtMs: z.number().int().nonnegative().optional(),
  }),
]);

const sessionRefSchema = z
  .object({
    sessionId: z.string().min(1).max(256),
    sessionKey: z
      .string()
      .regex(/^agent:[^:]+:.+$/, 'must look like agent:<agentId>:<key>')
      .max(512),
    agentId: z.string().min(1).max(128),
  })
  .refine((ref) => ref.sessionKey.split(':')[1] === ref.agentId, {
    message: 'sessionKey names another agent',
  });

function invalid(
  what: string,
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>,
): UserInputError {
  return new UserInputError({
    code: ErrorCodes.invalidRequest,
    message: `${what}: ${formatZodIssues(issues)}`,
  });
}

function checkRef(ref: SessionRef): SessionRef {
  const parsed = sessionRefSchema.safeParse(ref);
  if (!parsed.success) throw invalid('invalid session reference', parsed.error.issues);
  return parsed.data;
}

interface RamSession {
  ref: SessionRef;
  /** Active entries and recent tombstones, in context order. */
  entries: StoredEntry[];
  pins: Map<number, number>;
  /** Entries being summarized right now. */
  busy: Set<number>;
  lastActiveMs: number;
  nextId: number;
}

function publicCopy(entry: StoredEntry): MemoryEntry {
  const { orderKey: _orderKey, rowId: _rowId, ...rest } = entry;
  const copy: MemoryEntry = { ...rest };
  if (rest.toolCalls)
    copy.toolCalls = rest.toolCalls.map((call) => ({ ...call, arguments: { ...call.arguments } }));
  if (rest.sourceIds) copy.sourceIds = [...rest.sourceIds];
  if (rest.metadata) copy.metadata = { ...rest.metadata };
  return copy;
}

function activeOf(ram: RamSession): StoredEntry[] {
  return ram.entries.filter((entry) => entry.state === 'active');
}

function tokensOf(entries: ReadonlyArray<StoredEntry>): number {
  let total = 0;
  for (const entry of entries) total += entry.tokens;
  return total;
}

function entryTokens(input: {
  content: string;
  toolCalls?: ReadonlyArray<{ name: string; arguments: Record<string, unknown> }>;
}): number {
  let chars = input.content.length;
  for (const call of input.toolCalls ?? []) chars += call.name.length + JSON.stringify(call.arguments).length;
  return Math.ceil(chars / 4) + 4;
}

/** Where an entry lives: its MemoryID, its address and the session it belongs to. */
function entryIdentity(ram: RamSession, memoryId: number) {
  return {
    memoryId,
    address: `${ram.ref.sessionKey}#${memoryId}`,
    sessionId: ram.ref.sessionId,
    sessionKey: ram.ref.sessionKey,
    agentId: ram.ref.agentId,
  };
}

/**
 * The marker left where an entry was evicted or summarized: it keeps the replaced entry's context position
 * and costs no tokens, so the context still shows what went and where to find it.
 */
function tombstoneFor(
  ram: RamSession,
  memoryId: number,
  replaced: StoredEntry,
  content: string,
  metadata: Record<string, unknown>,
  nowMs: number,
): StoredEntry {
  return {
    ...entryIdentity(ram, memoryId),
    kind: 'entry',
    role: 'system',
    state: 'tombstone',
    content,
    relatedTo: replaced.memoryId,
    tokens: 0,
    createdAtMs: nowMs,
    archivedAtMs: null,
    metadata,
    orderKey: replaced.orderKey,
    rowId: undefined,
  };
}

function idRange(ids: ReadonlyArray<number>): string {
  if (ids.length === 0) return '';
  return ids.length === 1 ? `#${ids[0]}` : `#${ids[0]}–#${ids[ids.length - 1]}`;
}

/**
 * The memory service: per-session RAM contexts with stable MemoryIDs, written through to the database,
 * and long-term memory queries over everything ever written. See docs/memory.md.
 *
 * Every mutation and every LOAD of a session runs under that session's FIFO lock (a keyed mutex), so
 * concurrent writers (chat turn, memory manager, heartbeat) are applied one at a time in arrival order.
 * Summarizing calls the model outside the lock: the entries being summarized are marked busy (nothing
 * else touches them) while appends go on.
 */
export function createMemoryService(options: MemoryServiceOptions): MemoryService {
  const config = memoryConfigSchema.parse(options.config ?? {});
  const { db, bus } = options;
  const clock = options.clock ?? systemClock;
  const newId = options.idGenerator ?? createIdGenerator({ now: () => clock.now() });
  const logger = (options.logger ?? silentLogger).child({ component: 'memory' });
  const vectorSupport = { sqliteVec: false };
  const ltm = createLtmStore(db, vectorSupport);
  const mutex = createKeyedMutex();
  const sessions = new Map<string, RamSession>();
  const summarizer: Summarizer = createSummarizer({
    model: options.model,
    maxTokens: config.summaryMaxTokens,
    timeoutMs: config.summaryTimeoutMs,
    logger,
  });
  const embedder = options.embedder ?? embedderFromConfig(config, options);
  let degradedReason: string | undefined;

  if (embedder && db.dialect === 'sqlite') vectorSupport.sqliteVec = loadSqliteVec(db, logger);

  // ----- failure handling -----

  /**
   * Writes accepted while the database could not be written, per session, in commit order. Kept apart from
   * the RAM contexts so archiving a session does not drop them; written through by `retryWrites`.
   */
  const pendingWrites = new Map<
    string,
    { ref: SessionRef; writes: Array<(tx: SqlExecutor) => Promise<void>> }
  >();
  /** The next free MemoryID of each key as handed out while degraded, so a new instance does not reuse one. */
  const ramCounters = new Map<string, number>();
  const firstRetryMs = config.writeRetryMs;
  const maxRetryMs = Math.max(firstRetryMs, config.maxWriteRetryMs);
  let retryDelayMs = firstRetryMs;
  let retryTimer: NodeJS.Timeout | undefined;
  let degradedSinceMs = 0;

  const pendingCount = () => {
    let count = 0;
    for (const pending of pendingWrites.values()) count += pending.writes.length;
    return count;
  };

  const scheduleRetry = () => {
    if (retryTimer) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      void retryWrites();
    }, retryDelayMs);
    retryTimer.unref();
    retryDelayMs = Math.min(maxRetryMs, retryDelayMs * 2);
  };

  const enterDegraded = (error: unknown) => {
    scheduleRetry();
    if (degradedReason !== undefined) return;
    const failure = coerceError(error);
    degradedReason = failure.message;
    degradedSinceMs = clock.now();
    logger.error(
      { err: error, location: db.location },
      'memory database write failed; continuing in RAM and retrying until the database is back',
    );
    const message = `Memory could not be saved to ${db.location} (${failure.message}); new memories are kept in RAM and written through when the database is back. Until then a restart loses them.`;
    bus.publish('memory:degraded', { reason: message, code: ErrorCodes.storeUnavailable });
    bus.publish('system:error', { code: ErrorCodes.storeUnavailable, message, component: 'memory' });
  };

  /** Writes one session's queued writes through, oldest first; each commit is its own transaction. */
  const flushSession = async (sessionId: string): Promise<number> => {
    const pending = pendingWrites.get(sessionId);
    let written = 0;
    while (pending && pending.writes.length > 0) {
      await ltm.transaction(pending.writes[0]!);
      pending.writes.shift();
      written++;
    }
    pendingWrites.delete(sessionId);
    return written;
  };

  /** Tries the database again: writes everything queued through, and leaves degraded mode when that worked. */
  const retryWrites = async () => {
    if (degradedReason === undefined) return;
    let written = 0;
    try {
      for (const sessionId of [...pendingWrites.keys()]) {
        try {
          written += await mutex.run(sessionId, () => flushSession(sessionId));
        } catch (error) {
          if (UserInputError.isInstance(error) && error.code === ErrorCodes.conflict) {
            // Ids taken in the database meanwhile (the session could not even be read when it was loaded):
            // these writes can never go through, and retrying them would keep memory degraded forever.
            const dropped = pendingWrites.get(sessionId)?.writes.length ?? 0;
            pendingWrites.delete(sessionId);
            const message = `${dropped} memory write(s) of session ${sessionId} could not be written through: ${error.message}`;
            logger.error({ err: error, sessionId }, message);
            bus.publish('system:error', { code: ErrorCodes.storeUnavailable, message, component: 'memory' });
            continue;
          }
          throw error;
        }
      }
      // Nothing was queued (a read failed): a write transaction proves the database is usable again.
      if (written === 0) await ltm.transaction(async (tx) => void (await tx.get('SELECT 1 AS ok')));
    } catch (error) {
      logger.warn({ err: error, written }, 'memory database still not writable; retrying later');
      scheduleRetry();
      return;
    }
    if (pendingCount() > 0) {
      // Writes queued while this pass ran; the next pass takes them.
      scheduleRetry();
      return;
    }
    const degradedForMs = clock.now() - degradedSinceMs;
    degradedReason = undefined;
    retryDelayMs = firstRetryMs;
    ramCounters.clear();
    logger.warn(
      { writtenThrough: written, degradedForMs },
      'memory database writable again; left RAM-only mode',
    );
    bus.publish('memory:recovered', { writtenThrough: written, degradedForMs });
  };

  /** Runs a database read; on failure answers from RAM instead (and retries the database in the background). */
  const readWithFallback = async <T>(fromDb: () => Promise<T>, fromRam: () => T): Promise<T> => {
    try {
      return await fromDb();
    } catch (error) {
      enterDegraded(error);
    }
    return fromRam();
  };

  /** Entries of the key accepted while degraded and not written yet: what database reads cannot see. */
  const unwrittenEntries = (sessionKey: string): StoredEntry[] => {
    const found: StoredEntry[] = [];
    for (const ram of sessions.values())
      if (ram.ref.sessionKey === sessionKey)
        found.push(...ram.entries.filter((entry) => entry.rowId === undefined));
    return found;
  };

  // ----- RAM contexts -----

  const ensureLoaded = async (ref: SessionRef): Promise<RamSession> => {
    const existing = sessions.get(ref.sessionId);
    if (existing) {
      if (existing.ref.sessionKey !== ref.sessionKey) {
        throw new UserInputError({
          code: ErrorCodes.conflict,
          message: `Session ${ref.sessionId} belongs to ${existing.ref.sessionKey}, not ${ref.sessionKey}.`,
        });
      }
      return existing;
    }
    let entries: StoredEntry[] = [];
    let nextId = ramCounters.get(ref.sessionKey) ?? 1;
    try {
      const row = await ltm.getSession(ref.sessionId);
      if (row?.archivedAtMs != null) {
        throw new UserInputError({
          code: ErrorCodes.conflict,
          message: `Session ${ref.sessionId} (${ref.sessionKey}) was archived; start a new session instance to continue.`,
        });
      }
      if (row && row.ref.sessionKey !== ref.sessionKey) {
        throw new UserInputError({
          code: ErrorCodes.conflict,
          message: `Session ${ref.sessionId} belongs to ${row.ref.sessionKey}, not ${ref.sessionKey}.`,
        });
      }
      entries = await ltm.loadRam(ref.sessionId, config.maxRamTombstones);
      nextId = Math.max(nextId, await ltm.nextIdOf(ref.sessionKey));
    } catch (error) {
      if (UserInputError.isInstance(error) && error.fault === 'user') throw error;
      enterDegraded(error);
    }
    // Ids handed out in RAM-only mode by another instance of this key must not be reused either.
    for (const other of sessions.values())
      if (other.ref.sessionKey === ref.sessionKey) nextId = Math.max(nextId, other.nextId);
    const ram: RamSession = {
      ref,
      entries,
      pins: new Map(),
      busy: new Set(),
      lastActiveMs: clock.now(),
      nextId,
    };
    sessions.set(ref.sessionId, ram);
    const active = activeOf(ram);
    if (active.length > 0) {
      publishEvent(ram, {
        kind: 'restored',
        count: active.length,
        tokensBefore: 0,
        tokensAfter: tokensOf(active),
        memoryIds: active.map((entry) => entry.memoryId),
        message: `restored ${active.length} active entries from the database`,
      });
      // A crash between an append and its eviction can leave one entry too many; restore the invariant.
      await enforceLimits(ram);
    }
    return ram;
  };

  const withSession = <T>(ref: SessionRef, work: (ram: RamSession) => Promise<T>): Promise<T> => {
    const checked = checkRef(ref);
    return mutex.run(checked.sessionId, async () => work(await ensureLoaded(checked)));
  };

  const publishEvent = (
    ram: RamSession,
    detail: Omit<MemoryEventPayload, 'sessionKey' | 'sessionId' | 'agentId'>,
  ) => {
    const payload: MemoryEventPayload = {
      sessionKey: ram.ref.sessionKey,
      sessionId: ram.ref.sessionId,
      agentId: ram.ref.agentId,
      ...detail,
    };
    bus.publish('memory:event', payload, { sessionKey: ram.ref.sessionKey, agentId: ram.ref.agentId });
    return payload;
  };

  const eventRow = (
    ram: RamSession,
    payload: Omit<MemoryEventPayload, 'sessionKey' | 'sessionId' | 'agentId'>,
    nowMs: number,
  ) => ({
    id: newId('mev'),
    sessionId: ram.ref.sessionId,
    sessionKey: ram.ref.sessionKey,
    agentId: ram.ref.agentId,
    kind: payload.kind,
    count: payload.count,
    tokensBefore: payload.tokensBefore,
    tokensAfter: payload.tokensAfter,
    memoryIds: payload.memoryIds,
    message: payload.message,
    ...(payload.reason ? { details: { reason: payload.reason } } : {}),
    createdAtMs: nowMs,
  });

  /**
   * Reserves ids for `count` new entries, builds them, and commits them together with `also` in one
   * transaction. While the database cannot be written (or earlier writes of the session still wait), the
   * entries get ids from the RAM counter and the whole commit is queued to be written through in order.
   */
  const commit = async (
    ram: RamSession,
    count: number,
    build: (firstId: number) => StoredEntry[],
    also?: (tx: SqlExecutor) => Promise<void>,
  ): Promise<StoredEntry[]> => {
    const nowMs = clock.now();
    if (degradedReason === undefined && !pendingWrites.has(ram.ref.sessionId)) {
      try {
        const entries = await ltm.transaction(async (tx) => {
          await ltm.touchSession(tx, ram.ref, nowMs);
          const first =
            count > 0 ? await ltm.reserveIds(tx, ram.ref.sessionKey, count, ram.nextId) : ram.nextId;
          const built = build(first);
          for (const entry of built) entry.rowId = await ltm.insertEntry(tx, entry);
          if (also) await also(tx);
          return built;
        });
        if (count > 0) ram.nextId = entries[0]!.memoryId + count;
        return entries;
      } catch (error) {
        enterDegraded(error);
      }
    }
    const firstId = ram.nextId;
    const built = build(firstId);
    ram.nextId += count;
    ramCounters.set(ram.ref.sessionKey, Math.max(ramCounters.get(ram.ref.sessionKey) ?? 1, ram.nextId));
    // The rows as they are now: later RAM changes (tombstones, summaries) are queued as their own writes.
    const rows = built.map((entry) => ({ ...entry }));
    const pending = pendingWrites.get(ram.ref.sessionId) ?? { ref: ram.ref, writes: [] };
    pending.writes.push(async (tx) => {
      await ltm.touchSession(tx, ram.ref, nowMs);
      if (count > 0) {
        const first = await ltm.reserveIds(tx, ram.ref.sessionKey, count, firstId);
        if (first !== firstId)
          throw new UserInputError({
            code: ErrorCodes.conflict,
            message: `memory ids #${firstId}… of ${ram.ref.sessionKey} were taken in the database meanwhile`,
          });
      }
      for (const [index, row] of rows.entries()) {
        const rowId = await ltm.insertEntry(tx, row);
        built[index]!.rowId = rowId;
      }
      if (also) await also(tx);
    });
    pendingWrites.set(ram.ref.sessionId, pending);
    scheduleRetry();
    return built;
  };

  const dropTombstoneOverflow = (ram: RamSession) => {
    const tombstones = ram.entries.filter((entry) => entry.state === 'tombstone');
    if (tombstones.length <= config.maxRamTombstones) return;
    const keep = new Set(
      tombstones
        .sort((left, right) => right.memoryId - left.memoryId)
        .slice(0, config.maxRamTombstones)
        .map((entry) => entry.memoryId),
    );
    ram.entries = ram.entries.filter((entry) => entry.state !== 'tombstone' || keep.has(entry.memoryId));
  };

  /** Swaps the entries `ids` for what replaced them (tombstones, a summary), keeping context order. */
  const replaceInRam = (ram: RamSession, ids: ReadonlyArray<number>, replacements: StoredEntry[]) => {
    const gone = new Set(ids);
    ram.entries = [...ram.entries.filter((entry) => !gone.has(entry.memoryId)), ...replacements].sort(
      byContextOrder,
    );
    dropTombstoneOverflow(ram);
  };

  /**
   * The oldest active entries that may be replaced: whole groups (an assistant tool call with its tool
   * results) from the front, stopping at the first pinned or busy entry, leaving `keepLatest` entries.
   */
  const pickOldest = (
    ram: RamSession,
    wantMore: (takenCount: number, takenTokens: number) => boolean,
    keepLatest: number,
  ): StoredEntry[] => {
    const active = activeOf(ram);
    const groups: StoredEntry[][] = [];
    for (const entry of active) {
      if (
        entry.role === 'tool' &&
        groups.length > 0 &&
        groups[groups.length - 1]!.some((member) => member.toolCalls?.length)
      ) {
        groups[groups.length - 1]!.push(entry);
      } else {
        groups.push([entry]);
      }
    }
    const taken: StoredEntry[] = [];
    let takenTokens = 0;
    for (const group of groups) {
      if (!wantMore(taken.length, takenTokens)) break;
      if (group.some((entry) => ram.pins.has(entry.memoryId) || ram.busy.has(entry.memoryId))) break;
      if (active.length - taken.length - group.length < keepLatest) break;
      taken.push(...group);
      takenTokens += tokensOf(group);
    }
    return taken;
  };

  const evictEntries = async (ram: RamSession, victims: StoredEntry[], reason: string): Promise<number[]> => {
    if (victims.length === 0) return [];
    const before = tokensOf(activeOf(ram));
    const ids = victims.map((entry) => entry.memoryId);
    const nowMs = clock.now();
    const after = before - tokensOf(victims);
    const detail = {
      kind: 'evicted' as const,
      count: victims.length,
      tokensBefore: before,
      tokensAfter: after,
      memoryIds: ids,
      message: `evicted ${victims.length} oldest entries (${idRange(ids)}) to long-term memory`,
      reason,
    };
    const tombstones = await commit(
      ram,
      victims.length,
      (first) =>
        victims.map((victim, index) =>
          tombstoneFor(ram, first + index, victim, `[evicted:${victim.memoryId}]`, { reason }, nowMs),
        ),
      async (tx) => {
        await ltm.setStates(tx, ram.ref.sessionKey, ids, 'evicted', nowMs);
        await ltm.insertEvent(tx, eventRow(ram, detail, nowMs));
      },
    );
    replaceInRam(ram, ids, tombstones);
    publishEvent(ram, detail);
    return ids;
  };

  /** The hard limit: evict the oldest groups until active entries and tokens fit (tombstones do not count). */
  const enforceLimits = async (ram: RamSession): Promise<void> => {
    const active = activeOf(ram);
    const count = active.length;
    const tokens = tokensOf(active);
    if (count <= config.maxActiveEntries && tokens <= config.maxActiveTokens) return;
    const victims = pickOldest(
      ram,
      (takenCount, takenTokens) =>
        count - takenCount > config.maxActiveEntries || tokens - takenTokens > config.maxActiveTokens,
      1,
    );
    await evictEntries(ram, victims, 'limit');
  };

  const buildEntry = (ram: RamSession, input: AppendInput, memoryId: number, nowMs: number): StoredEntry => {
    const entry: StoredEntry = {
      ...entryIdentity(ram, memoryId),
      kind: 'entry',
      role: input.role,
      state: 'active',
      content: input.content,
      relatedTo: null,
      tokens: entryTokens(input),
      createdAtMs: input.createdAtMs ?? nowMs,
      archivedAtMs: null,
      orderKey: memoryId,
      rowId: undefined,
    };
    if (input.metadata) entry.metadata = input.metadata;
    if (input.role === 'assistant' && input.toolCalls?.length) entry.toolCalls = input.toolCalls;
    if (input.role === 'tool') {
      entry.toolCallId = input.toolCallId;
      entry.toolName = input.toolName;
      entry.isError = input.isError ?? false;
    }
    return entry;
  };

  const appendBatch = async (
    ref: SessionRef,
    inputs: ReadonlyArray<AppendInput>,
    also?: AlsoInTransaction,
  ): Promise<MemoryEntry[]> => {
    const parsed = inputs.map((input, index) => {
      const result = appendInputSchema.safeParse(input);
      if (!result.success) throw invalid(`invalid memory entry ${index}`, result.error.issues);
      return result.data as AppendInput;
    });
    if (parsed.length === 0) return [];
    return withSession(ref, async (ram) => {
      const nowMs = clock.now();
      const entries = await commit(
        ram,
        parsed.length,
        (first) => parsed.map((input, index) => buildEntry(ram, input, first + index, nowMs)),
        also,
      );
      ram.entries.push(...entries);
      ram.lastActiveMs = nowMs;
      for (const entry of entries) queueEmbedding(entry);
      await enforceLimits(ram);
      return entries.map(publicCopy);
    });
  };

  // ----- embeddings -----

  const pendingEmbeddings: StoredEntry[] = [];
  let draining: Promise<void> | undefined;

  const drainEmbeddings = async (provider: EmbeddingProvider) => {
    while (pendingEmbeddings.length > 0) {
      const batch = pendingEmbeddings.splice(0, config.embeddings.batchSize);
      try {
        const vectors = await provider.embed(batch.map((entry) => entry.content));
        await ltm.insertVectors(
          batch.map((entry, index) => ({
            rowId: entry.rowId!,
            agentId: entry.agentId,
            vector: vectors[index]!,
          })),
          provider.model,
        );
      } catch (error) {
        logger.warn(
          { err: error, count: batch.length },
          'embedding failed; these entries stay keyword-searchable only',
        );
      }
    }
  };

  const startDraining = () => {
    if (!embedder || draining || pendingEmbeddings.length === 0) return;
    draining = drainEmbeddings(embedder).finally(() => {
      draining = undefined;
      startDraining();
    });
  };

  const queueEmbedding = (entry: StoredEntry) => {
    if (!embedder || entry.rowId === undefined || entry.state === 'tombstone' || entry.content.trim() === '')
      return;
    pendingEmbeddings.push(entry);
    startDraining();
  };

  // ----- reads -----

  const ramEntries = (filter: { agentId: string; sessionKey?: string }): StoredEntry[] => {
    const found: StoredEntry[] = [];
    for (const ram of sessions.values()) {
      if (ram.ref.agentId !== filter.agentId) continue;
      if (filter.sessionKey !== undefined && ram.ref.sessionKey !== filter.sessionKey) continue;
      found.push(...ram.entries);
    }
    return found.sort(
      (left, right) => right.createdAtMs - left.createdAtMs || right.memoryId - left.memoryId,
    );
  };

  const clampLimit = (limit: number | undefined, fallback: number) =>
    Math.max(1, Math.min(config.recall.maxLimit, Math.floor(limit ?? fallback)));

  const resolveIds = (ids: ReadonlyArray<number | string>, sessionKey: string | undefined) =>
    ids.map((id) => {
      if (typeof id === 'number') {
        if (sessionKey === undefined) {
          throw new UserInputError({
            code: ErrorCodes.invalidRequest,
            message: 'Numeric memory ids need a sessionKey; or pass addresses <sessionKey>#<n>.',
          });
        }
        return { sessionKey, memoryId: id };
      }
      const parsed =
        parseMemoryAddress(id) ??
        (sessionKey !== undefined && /^\d+$/.test(id) ? { sessionKey, memoryId: Number(id) } : undefined);
      if (!parsed)
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: `"${id}" is not a memory id or address.`,
        });
      return parsed;
    });

  const search = async (searchOptions: SearchOptions): Promise<SearchHit[]> => {
    const limit = Math.max(
      1,
      Math.min(config.recall.maxLimit, Math.floor(searchOptions.limit ?? config.recall.searchDefaultLimit)),
    );
    const terms = queryTerms(searchOptions.query);
    const exclude = searchOptions.excludeAddresses ?? new Set<string>();
    const mode: 'fts' | 'hybrid' = searchOptions.mode === 'fts' || !embedder ? 'fts' : 'hybrid';
    if (searchOptions.mode === 'hybrid' && !embedder) {
      throw new UserInputError({
        code: ErrorCodes.invalidRequest,
        message: 'Hybrid search needs an embedding provider (memory.embeddings).',
      });
    }
    const filter: EntryFilter = {
      agentId: searchOptions.agentId,
      ...(searchOptions.sessionKey !== undefined ? { sessionKey: searchOptions.sessionKey } : {}),
      includeArchived: searchOptions.includeArchived ?? true,
      ...(searchOptions.kind && searchOptions.kind !== 'all' ? { kind: searchOptions.kind } : {}),
    };
    const toHit = (entry: StoredEntry, score: number): SearchHit => ({
      address: entry.address,
      sessionKey: entry.sessionKey,
      memoryId: entry.memoryId,
      kind: entry.kind,
      role: entry.role,
      state: entry.state,
      content: entry.content,
      score,
      createdAtMs: entry.createdAtMs,
      source: entry.archivedAtMs !== null ? 'archive' : entry.state === 'active' ? 'ram' : 'ltm',
      mode,
    });
    return readWithFallback(
      async () => {
        if (mode === 'fts') {
          const rows = await ltm.fullText(filter, terms, limit + exclude.size);
          return rows
            .map((row) => toHit(rowToEntry(row), row.rank))
            .filter((hit) => !exclude.has(hit.address))
            .slice(0, limit);
        }
        const candidates = config.embeddings.candidateCount + exclude.size;
        const [rows, [queryVector]] = await Promise.all([
          ltm.fullText(filter, terms, candidates),
          embedder!.embed([searchOptions.query]),
        ]);
        const near = await ltm.nearest(filter, embedder!.model, queryVector!, candidates);
        // Reciprocal-rank fusion: robust to the two rankings having unrelated score scales.
        const fused = new Map<number, number>();
        rows.forEach((row, index) => {
          fused.set(Number(row.id), 1 / (60 + index + 1));
        });
        near.forEach((hit, index) => {
          fused.set(
            hit.rowId,
            (fused.get(hit.rowId) ?? 0) + config.embeddings.vectorWeight / (60 + index + 1),
          );
        });
        const order = [...fused.entries()].sort((left, right) => right[1] - left[1] || right[0] - left[0]);
        const known = new Map(rows.map((row) => [Number(row.id), rowToEntry(row)] as const));
        const missing = order.map(([rowId]) => rowId).filter((rowId) => !known.has(rowId));
        for (const [rowId, entry] of await ltm.entriesByRowIds(missing)) known.set(rowId, entry);
        const hits: SearchHit[] = [];
        for (const [rowId, score] of order) {
          const entry = known.get(rowId);
          if (!entry || exclude.has(entry.address)) continue;
          hits.push(toHit(entry, score));
          if (hits.length >= limit) break;
        }
        return hits;
      },
      () => {
        const wanted = new Set(terms);
        return ramEntries(filter)
          .filter((entry) => entry.state !== 'tombstone' && !exclude.has(entry.address))
          .filter((entry) => !filter.kind || entry.kind === filter.kind)
          .map((entry) => {
            let score = 0;
            for (const token of new Set(wordTokens(entry.content))) if (wanted.has(token)) score++;
            return { entry, score };
          })
          .filter((scored) => scored.score > 0)
          .sort((left, right) => right.score - left.score || right.entry.memoryId - left.entry.memoryId)
          .slice(0, limit)
          .map((scored) => ({ ...toHit(scored.entry, scored.score), mode: 'fts' as const }));
      },
    );
  };

  const service: MemoryService = {
    config,

    append: async (ref, input, also) => (await appendBatch(ref, [input], also))[0]!,

    persist: (ref, write) =>
      withSession(ref, async (ram) => {
        await commit(ram, 0, () => [], write);
      }),

    appendBatch,

    load: (ref) => withSession(ref, async (ram) => activeOf(ram).map(publicCopy)),

    pin: (ref, memoryIds) =>
      withSession(ref, async (ram) => {
        const active = activeOf(ram);
        const wanted = memoryIds ? new Set(memoryIds) : undefined;
        const pinned = active.filter((entry) => !wanted || wanted.has(entry.memoryId));
        for (const entry of pinned) ram.pins.set(entry.memoryId, (ram.pins.get(entry.memoryId) ?? 0) + 1);
        let released = false;
        return {
          memoryIds: pinned.map((entry) => entry.memoryId),
          entries: active.map(publicCopy),
          release: () => {
            if (released) return;
            released = true;
            for (const entry of pinned) {
              const left = (ram.pins.get(entry.memoryId) ?? 1) - 1;
              if (left <= 0) ram.pins.delete(entry.memoryId);
              else ram.pins.set(entry.memoryId, left);
            }
            // Limits could not be enforced over pinned entries; do it now, in the session's queue.
            if (sessions.get(ram.ref.sessionId) === ram) {
              mutex
                .run(ram.ref.sessionId, async () => {
                  if (sessions.get(ram.ref.sessionId) === ram) await enforceLimits(ram);
                })
                .catch((error) =>
                  logger.warn(
                    { err: error, sessionKey: ram.ref.sessionKey },
                    'enforcing limits after unpin failed',
                  ),
                );
            }
          },
        };
      }),

    evict: (ref, evictOptions = {}) =>
      withSession(ref, async (ram) => {
        const count = Math.max(1, Math.floor(evictOptions.count ?? 1));
        const victims = pickOldest(ram, (takenCount) => takenCount < count, 1);
        return evictEntries(ram, victims, evictOptions.reason ?? 'requested');
      }),

    async summarize(ref, summarizeOptions = {}) {
      const maxEntries = Math.max(1, Math.floor(summarizeOptions.maxEntries ?? config.summarizeBatch));
      const keepLatest = Math.max(0, Math.floor(summarizeOptions.keepLatest ?? 1));
      const reason = summarizeOptions.reason ?? 'requested';
      const picked = await withSession(ref, async (ram) => {
        // A summary of a single entry saves nothing, unless that entry is itself large.
        const candidates = pickOldest(ram, (takenCount) => takenCount < maxEntries, keepLatest);
        if (candidates.length === 0) return undefined;
        for (const entry of candidates) ram.busy.add(entry.memoryId);
        return { ram, candidates };
      });
      if (!picked)
        return { summary: undefined, summarizedIds: [], method: undefined, skipped: 'nothing-to-summarize' };
      const { ram, candidates } = picked;
      const ids = candidates.map((entry) => entry.memoryId);
      const releaseBusy = () => {
        for (const id of ids) ram.busy.delete(id);
      };
      let result: Awaited<ReturnType<Summarizer['summarize']>>;
      try {
        result = await summarizer.summarize(candidates.map(publicCopy), { signal: summarizeOptions.signal });
      } catch (error) {
        releaseBusy();
        throw error;
      }
      return mutex.run(ram.ref.sessionId, async () => {
        try {
          if (sessions.get(ram.ref.sessionId) !== ram) {
            return {
              summary: undefined,
              summarizedIds: [],
              method: undefined,
              skipped: 'session-gone' as const,
            };
          }
          if (candidates.some((entry) => ram.pins.has(entry.memoryId))) {
            return { summary: undefined, summarizedIds: [], method: undefined, skipped: 'pinned' as const };
          }
          const nowMs = clock.now();
          const before = tokensOf(activeOf(ram));
          const summaryTokens = entryTokens({ content: result.text });
          const detail = {
            kind: 'summarized' as const,
            count: candidates.length,
            tokensBefore: before,
            tokensAfter: before - tokensOf(candidates) + summaryTokens,
            memoryIds: ids,
            message:
              `summarized ${candidates.length} entries (${idRange(ids)}) ` +
              (result.method === 'model'
                ? 'with the model'
                : `extractively (${result.fallbackReason ?? 'fallback'})`),
            reason,
          };
          const written = await commit(
            ram,
            candidates.length + 1,
            (first) => [
              {
                ...entryIdentity(ram, first),
                kind: 'summary',
                role: 'system',
                state: 'active',
                content: result.text,
                relatedTo: null,
                sourceIds: ids,
                tokens: summaryTokens,
                createdAtMs: nowMs,
                archivedAtMs: null,
                metadata: { sourceIds: ids, method: result.method, reason },
                orderKey: candidates[0]!.orderKey,
                rowId: undefined,
              },
              ...candidates.map((candidate, index) =>
                tombstoneFor(
                  ram,
                  first + 1 + index,
                  candidate,
                  `[summarized:${candidate.memoryId}] → #${first}`,
                  { summaryId: first },
                  nowMs,
                ),
              ),
            ],
            async (tx) => {
              await ltm.setStates(tx, ram.ref.sessionKey, ids, 'summarized', nowMs);
              await ltm.insertEvent(tx, eventRow(ram, detail, nowMs));
            },
          );
          replaceInRam(ram, ids, written);
          queueEmbedding(written[0]!);
          publishEvent(ram, detail);
          releaseBusy();
          await enforceLimits(ram);
          return { summary: publicCopy(written[0]!), summarizedIds: ids, method: result.method };
        } finally {
          releaseBusy();
        }
      });
    },

    snapshot: (ref, reason) => withSession(ref, async (ram) => takeSnapshot(ram, reason)),

    async archive(sessionId, reason) {
      return mutex.run(sessionId, async () => {
        let ref = sessions.get(sessionId)?.ref;
        if (!ref) {
          const row = await ltm.getSession(sessionId);
          if (row?.archivedAtMs != null) {
            return {
              sessionId,
              sessionKey: row.ref.sessionKey,
              archived: false,
              snapshotId: null,
              entryCount: 0,
            };
          }
          ref = row?.ref;
        }
        if (!ref) return { sessionId, sessionKey: null, archived: false, snapshotId: null, entryCount: 0 };
        const ram = await ensureLoaded(ref);
        const snapshot = await takeSnapshot(ram, reason);
        const nowMs = clock.now();
        const active = activeOf(ram);
        const detail = {
          kind: 'archived' as const,
          count: active.length,
          tokensBefore: tokensOf(active),
          tokensAfter: 0,
          memoryIds: active.map((entry) => entry.memoryId),
          message: `archived session ${sessionId} (${reason})`,
          reason,
        };
        let entryCount = ram.entries.length;
        await commit(
          ram,
          0,
          () => [],
          async (tx) => {
            entryCount = await ltm.archiveSession(tx, sessionId, reason, nowMs);
            await ltm.insertEvent(tx, eventRow(ram, detail, nowMs));
          },
        );
        sessions.delete(sessionId);
        publishEvent(ram, detail);
        return {
          sessionId,
          sessionKey: ref.sessionKey,
          archived: true,
          snapshotId: snapshot.snapshotId,
          entryCount,
        };
      });
    },

    stats: (ref) => withSession(ref, async (ram) => statsOf(ram)),

    loadedSessions: () => [...sessions.values()].map(statsOf),

    unload: (sessionId) =>
      mutex.run(sessionId, async () => {
        const ram = sessions.get(sessionId);
        if (!ram) return true;
        if (ram.pins.size > 0 || ram.busy.size > 0) return false;
        // Entries not written through yet exist only in the RAM context.
        if (degradedReason !== undefined || pendingWrites.has(sessionId)) return false;
        sessions.delete(sessionId);
        return true;
      }),

    async recall(recallOptions) {
      const limit = clampLimit(recallOptions.limit, config.recall.defaultLimit);
      const includeFull = recallOptions.includeFull ?? false;
      const includeArchived = recallOptions.includeArchived ?? true;
      const itemOptions = { includeFull, previewChars: config.recall.previewChars };
      const base = {
        agentId: recallOptions.agentId,
        ...(recallOptions.sessionKey !== undefined ? { sessionKey: recallOptions.sessionKey } : {}),
      };
      return readWithFallback(
        async () => {
          const steps: EntryFilter[] = [
            { ...base, includeArchived: false, kind: 'summary', states: ['active', 'summarized'] },
            { ...base, includeArchived: false, kind: 'entry', states: ['active'] },
            ...(includeFull
              ? [
                  {
                    ...base,
                    includeArchived: false,
                    kind: 'entry' as const,
                    states: ['summarized', 'evicted'] as const,
                  },
                ]
              : []),
            ...(includeArchived
              ? [
                  {
                    ...base,
                    includeArchived: true,
                    archivedOnly: true,
                    kind: 'summary' as const,
                    states: ['active', 'summarized'] as const,
                  },
                  {
                    ...base,
                    includeArchived: true,
                    archivedOnly: true,
                    kind: 'entry' as const,
                    states: includeFull
                      ? (['active', 'summarized', 'evicted'] as const)
                      : (['active'] as const),
                  },
                ]
              : []),
          ];
          const items: MemoryItem[] = [];
          for (const filter of steps) {
            if (items.length >= limit) break;
            const entries = await ltm.listEntries(filter, limit - items.length);
            items.push(...entries.map((entry) => toMemoryItem(entry, itemOptions)));
          }
          return items;
        },
        () => {
          const entries = ramEntries(base).filter((entry) => entry.state === 'active');
          return [
            ...entries.filter((entry) => entry.kind === 'summary'),
            ...entries.filter((entry) => entry.kind === 'entry'),
          ]
            .slice(0, limit)
            .map((entry) => toMemoryItem(entry, itemOptions));
        },
      );
    },

    async query(queryOptions) {
      const limit = clampLimit(queryOptions.limit, config.recall.defaultLimit);
      const kind = queryOptions.kind && queryOptions.kind !== 'all' ? queryOptions.kind : undefined;
      const filter: EntryFilter = {
        agentId: queryOptions.agentId,
        ...(queryOptions.sessionKey !== undefined ? { sessionKey: queryOptions.sessionKey } : {}),
        includeArchived: queryOptions.includeArchived ?? true,
        ...(kind ? { kind } : {}),
      };
      const ids = queryOptions.memoryIds?.length
        ? resolveIds(queryOptions.memoryIds, queryOptions.sessionKey)
        : undefined;
      const topic = queryOptions.topic?.trim() || undefined;
      const itemOptions = { includeFull: true, previewChars: config.recall.previewChars };
      return readWithFallback(
        async () => {
          let entries: StoredEntry[];
          if (ids) {
            entries = await ltm.entriesByIds(filter, ids, topic ? config.recall.maxLimit : limit);
            if (topic) {
              const needle = topic.toLowerCase();
              entries = entries
                .filter((entry) => entry.content.toLowerCase().includes(needle))
                .slice(0, limit);
            }
          } else if (topic) {
            entries = await ltm.topic(filter, topic, limit);
          } else {
            entries = await ltm.listEntries(filter, limit);
          }
          return entries.map((entry) => toMemoryItem(entry, itemOptions));
        },
        () => {
          const wanted = ids ? new Set(ids.map((id) => `${id.sessionKey}#${id.memoryId}`)) : undefined;
          const needle = topic?.toLowerCase();
          return ramEntries(filter)
            .filter((entry) => !kind || entry.kind === kind)
            .filter((entry) => !wanted || wanted.has(entry.address))
            .filter((entry) => !needle || entry.content.toLowerCase().includes(needle))
            .slice(0, limit)
            .map((entry) => toMemoryItem(entry, itemOptions));
        },
      );
    },

    search,

    async get(address) {
      const parsed = parseMemoryAddress(address);
      if (!parsed) return undefined;
      return readWithFallback(
        async () => {
          const entry =
            (await ltm.entryByAddress(parsed.sessionKey, parsed.memoryId)) ??
            unwrittenEntries(parsed.sessionKey).find((candidate) => candidate.memoryId === parsed.memoryId);
          return entry ? publicCopy(entry) : undefined;
        },
        () => {
          for (const ram of sessions.values()) {
            const entry = ram.entries.find((candidate) => candidate.address === address);
            if (entry) return publicCopy(entry);
          }
          return undefined;
        },
      );
    },

    async history(sessionKey, historyOptions = {}) {
      const limit = Math.max(1, Math.min(1000, Math.floor(historyOptions.limit ?? 200)));
      const toHistory = (entry: StoredEntry): HistoryEntry => ({
        memoryId: entry.memoryId,
        address: entry.address,
        sessionId: entry.sessionId,
        role: entry.role as 'user' | 'assistant',
        content: entry.content,
        state: entry.state,
        createdAtMs: entry.createdAtMs,
        archived: entry.archivedAtMs !== null,
      });
      const wanted = (entry: StoredEntry) =>
        entry.kind === 'entry' &&
        (entry.role === 'user' || entry.role === 'assistant') &&
        (historyOptions.beforeMemoryId === undefined || entry.memoryId < historyOptions.beforeMemoryId);
      return readWithFallback(
        async () => {
          const stored = (
            await ltm.history(sessionKey, {
              limit,
              ...(historyOptions.beforeMemoryId !== undefined
                ? { beforeMemoryId: historyOptions.beforeMemoryId }
                : {}),
              includeArchived: historyOptions.includeArchived ?? false,
            })
          ).map(toHistory);
          // Stored history plus what was accepted while the database could not be written.
          const unwritten = unwrittenEntries(sessionKey).filter(wanted).map(toHistory);
          if (unwritten.length === 0) return stored;
          const known = new Set(stored.map((entry) => entry.memoryId));
          return [...stored, ...unwritten.filter((entry) => !known.has(entry.memoryId))]
            .sort((left, right) => left.memoryId - right.memoryId)
            .slice(-limit);
        },
        () =>
          [...sessions.values()]
            .filter((ram) => ram.ref.sessionKey === sessionKey)
            .flatMap((ram) => ram.entries)
            .filter(
              (entry) =>
                entry.kind === 'entry' &&
                entry.state === 'active' &&
                (entry.role === 'user' || entry.role === 'assistant'),
            )
            .filter(
              (entry) =>
                historyOptions.beforeMemoryId === undefined || entry.memoryId < historyOptions.beforeMemoryId,
            )
            .sort((left, right) => left.memoryId - right.memoryId)
            .slice(-limit)
            .map(toHistory),
      );
    },

    async recallForPrompt(promptOptions) {
      const maxTokens = promptOptions.maxTokens ?? config.recall.promptMaxTokens;
      if (!promptOptions.query.trim()) return '';
      const inContext = new Set<string>();
      for (const ram of sessions.values()) {
        if (ram.ref.sessionKey !== promptOptions.sessionKey) continue;
        for (const entry of activeOf(ram)) inContext.add(entry.address);
      }
      if (inContext.size === 0 && degradedReason === undefined) {
        const active = await ltm
          .listEntries(
            {
              agentId: promptOptions.agentId,
              sessionKey: promptOptions.sessionKey,
              includeArchived: false,
              states: ['active'],
            },
            config.maxActiveEntries * 4,
          )
          .catch(() => []);
        for (const entry of active) inContext.add(entry.address);
      }
      const hits = await search({
        agentId: promptOptions.agentId,
        query: promptOptions.query,
        limit: config.recall.searchDefaultLimit,
        excludeAddresses: inContext,
      });
      const header = 'Relevant memories from earlier conversations (may be outdated):';
      const lines: string[] = [];
      let used = estimateTokens(header);
      for (const hit of hits) {
        const date = new Date(hit.createdAtMs).toISOString().slice(0, 10);
        const who = hit.kind === 'summary' ? 'summary' : hit.role;
        const line = `- [${hit.address}, ${date}] ${who}: ${truncateText(hit.content.replace(/\s+/g, ' ').trim(), config.recall.previewChars).text}`;
        const cost = estimateTokens(line);
        if (used + cost > maxTokens) break;
        lines.push(line);
        used += cost;
      }
      return lines.length === 0 ? '' : `${header}\n${lines.join('\n')}`;
    },

    async deleteSessionKey(sessionKey) {
      for (const ram of [...sessions.values()]) {
        if (ram.ref.sessionKey !== sessionKey) continue;
        await mutex.run(ram.ref.sessionId, async () => {
          sessions.delete(ram.ref.sessionId);
        });
      }
      return ltm.deleteSessionKey(sessionKey);
    },

    async applyRetention() {
      const result = await ltm.applyRetention({ nowMs: clock.now(), ...config.retention });
      if (result.snapshotsDeleted + result.eventsDeleted + result.archivedSessionsDeleted > 0) {
        logger.info(result, 'memory retention applied');
      }
      return result;
    },

    async flushEmbeddings() {
      while (draining) await draining;
    },

    async backfillEmbeddings(limit = 1000) {
      if (!embedder || degradedReason !== undefined) return 0;
      const queued = new Set(pendingEmbeddings.map((entry) => entry.rowId));
      const missing = (await ltm.entriesWithoutVectors(embedder.model, limit)).filter(
        (entry) => !queued.has(entry.rowId),
      );
      for (const entry of missing) queueEmbedding(entry);
      await service.flushEmbeddings();
      return missing.length;
    },

    reportWriteFailure: (error) => enterDegraded(error),

    status: () => ({
      degraded: degradedReason !== undefined,
      degradedReason,
      pendingWrites: pendingCount(),
      loadedSessions: sessions.size,
      pendingEmbeddings: pendingEmbeddings.length,
      searchMode: embedder ? 'hybrid' : 'fts',
      embeddingModel: embedder?.model,
    }),
  };

  function statsOf(ram: RamSession): SessionStats {
    const active = activeOf(ram);
    return {
      sessionId: ram.ref.sessionId,
      sessionKey: ram.ref.sessionKey,
      agentId: ram.ref.agentId,
      activeEntries: active.length,
      activeTokens: tokensOf(active),
      tombstones: ram.entries.length - active.length,
      pinned: ram.pins.size,
      nextMemoryId: ram.nextId,
      lastActiveMs: ram.lastActiveMs,
    };
  }

  async function takeSnapshot(ram: RamSession, reason: string): Promise<SnapshotResult> {
    const active = activeOf(ram);
    const nowMs = clock.now();
    const snapshot = {
      id: newId('msnap'),
      sessionId: ram.ref.sessionId,
      sessionKey: ram.ref.sessionKey,
      agentId: ram.ref.agentId,
      reason,
      nextId: ram.nextId,
      entryCount: active.filter((entry) => entry.kind === 'entry').length,
      summaryCount: active.filter((entry) => entry.kind === 'summary').length,
      tombstoneCount: ram.entries.length - active.length,
      activeTokens: tokensOf(active),
      activeIds: active.map((entry) => entry.memoryId),
      createdAtMs: nowMs,
    };
    const detail = {
      kind: 'snapshot' as const,
      count: active.length,
      tokensBefore: snapshot.activeTokens,
      tokensAfter: snapshot.activeTokens,
      memoryIds: snapshot.activeIds,
      message: `snapshot of ${active.length} active entries (${reason})`,
      reason,
    };
    await commit(
      ram,
      0,
      () => [],
      async (tx) => {
        await ltm.insertSnapshot(tx, snapshot);
        await ltm.insertEvent(tx, eventRow(ram, detail, nowMs));
      },
    );
    publishEvent(ram, detail);
    return {
      snapshotId: snapshot.id,
      entryCount: snapshot.entryCount,
      summaryCount: snapshot.summaryCount,
      tombstoneCount: snapshot.tombstoneCount,
      activeTokens: snapshot.activeTokens,
    };
  }

  return service;
}

function embedderFromConfig(
  config: MemoryConfig,
  options: MemoryServiceOptions,
): EmbeddingProvider | undefined {
  const settings = config.embeddings;
  if (settings.provider === 'hash') return createHashingEmbedder({ dimensions: settings.dimensions ?? 256 });
  if (settings.provider === 'openai') {
    const env = options.env ?? process.env;
    return createOpenAiEmbedder({
      baseUrl: settings.baseUrl,
      model: settings.model,
      ...(env[settings.apiKeyEnv] ? { apiKey: env[settings.apiKeyEnv] } : {}),
      ...(settings.dimensions ? { dimensions: settings.dimensions } : {}),
      timeoutMs: settings.timeoutMs,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
  }
  return undefined;
}

/** Loads sqlite-vec into the SQLite connection when the store exposes its driver; false when unavailable. */
function loadSqliteVec(db: SqlDatabase, logger: Logger): boolean {
  const driver = (
    db as { driver?: { loadExtension?: unknown; prepare?: (sql: string) => { get(): unknown } } }
  ).driver;
  if (!driver?.prepare) return false;
  try {
    driver.prepare('SELECT vec_version()').get();
    return true;
  } catch {
    // Not loaded yet.
  }
  try {
    const require = createRequire(import.meta.url);
    const sqliteVec = require('sqlite-vec') as { load(db: unknown): void };
    sqliteVec.load(driver);
    return true;
  } catch (error) {
    // An optional dependency: installs with `--omit=optional` (or platforms without a build) lack it.
    logger.warn(
      { err: error },
      'the optional package sqlite-vec could not be loaded (npm install sqlite-vec); vector similarity is computed in JS',
    );
    return false;
  }
}
