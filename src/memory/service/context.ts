import { z } from 'zod';
import type { Bus } from '../../bus/index.js';
import type { ModelMessage, ModelToolCall } from '../../model/index.js';
import type { SqlDatabase, SqlExecutor } from '../../store/index.js';
import {
  type BackoffTimer,
  type Clock,
  createIdGenerator,
  createKeyedMutex,
  ErrorCodes,
  formatZodIssues,
  type IdGenerator,
  type Logger,
  StringDictionary,
  silentLogger,
  systemClock,
  UserInputError,
} from '../../util/index.js';
import { type MemoryConfig, memoryConfigSchema } from '../config.js';
import type { EmbeddingProvider } from '../embeddings.js';
import { createLtmStore, type LtmStore, type StoredEntry } from '../ltm-store.js';
import { createSummarizer, type Summarizer } from '../summarizer.js';
import type { AppendInput, SessionRef } from '../types.js';
import { embedderFromConfig, loadSqliteVec } from './embedding-indexer.js';
import { LoadedSessions } from './loaded-sessions.js';
import type { MemoryServiceOptions } from './types.js';
import { createWriteRetryState, retryWrites } from './write-retry.js';

/** One loaded session instance: its context in RAM, in the order the model sees it. */
export interface RamSession {
  /** Never replaced: the loaded sessions are indexed by its key. */
  readonly ref: SessionRef;
  /** Active entries and recent tombstones, in context order. */
  entries: StoredEntry[];
  /**
   * The active entries' count and tokens (see `activeTotals`): kept up to date by appends, which only add
   * active entries; undefined after any other change of `entries`, and counted again when next needed.
   */
  totals: { readonly count: number; readonly tokens: number } | undefined;
  /**
   * The active entries in context order (see `activeOf`), kept up to date by appends like `totals` and
   * undefined after any other change of `entries`. Never handed out: `activeOf` gives a copy.
   */
  active: StoredEntry[] | undefined;
  /** The model messages of `active`, one for one: made, kept and dropped with it. */
  activeMessages: Array<Readonly<ModelMessage>> | undefined;
  /** Entries that a lease of chosen entries holds (see `StoredEntry.pins`): a context with any is not unloaded. */
  pinnedEntries: number;
  /**
   * For each lease of the whole context (a chat turn's), the highest MemoryID the session had given out when
   * it was taken: every active entry up to it is pinned, as an entry leaves the active state only for good
   * and new entries take higher ids. A context with any is not unloaded.
   */
  contextPins: number[];
  /** Entries being summarized right now. */
  busy: Set<number>;
  lastActiveMs: number;
  nextId: number;
  /** When a commit last wrote the session's `memory_sessions.last_active_ms` (undefined: not yet). */
  storedActiveMs: number | undefined;
  /**
   * Whether RAM holds every active entry of the instance the database has: the load read them, and no other
   * writer has added entries to the key since. When not (the load failed, or a commit found its ids taken),
   * the commits leave the stored `live_from_id` as it is.
   */
  knowsStoredActive: boolean;
}

/** A commit that could not be written yet, replayed in its own transaction when the database is back. */
export type PendingWrite = (tx: SqlExecutor) => Promise<void>;

/** The write-retry queue: set while the database cannot be written. */
export interface WriteRetryState {
  /** Why memory is degraded (RAM-only); undefined while the database is writable. */
  degradedReason: string | undefined;
  degradedSinceMs: number;
  /**
   * Writes accepted while the database could not be written, per session, in commit order. Kept apart from
   * the RAM contexts so archiving a session does not drop them; written through by `retryWrites`.
   */
  readonly pendingWrites: Map<string, { ref: SessionRef; writes: PendingWrite[] }>;
  /** The next free MemoryID of each key as handed out while degraded, so a new instance does not reuse one. */
  readonly ramCounters: Map<string, number>;
  /** Runs `retryWrites` later, the wait doubling while the database stays unwritable. */
  readonly retry: BackoffTimer;
}

/** The embedding indexer's queue: entries written but not yet embedded. */
export interface EmbeddingQueueState {
  readonly pending: StoredEntry[];
  draining: Promise<void> | undefined;
}

/**
 * Everything the memory service's steps share. Built once by `createMemoryService`; every step module
 * (RAM context, write-retry queue, recall, embedding indexer, snapshots, summarize) is a set of functions
 * of this object.
 */
export interface MemoryContext {
  readonly config: MemoryConfig;
  readonly db: SqlDatabase;
  readonly bus: Bus;
  readonly clock: Clock;
  readonly newId: IdGenerator;
  readonly logger: Logger;
  readonly ltm: LtmStore;
  /** Per-session FIFO lock: every mutation and every load of a session runs under it. */
  readonly mutex: ReturnType<typeof createKeyedMutex>;
  /** Loaded RAM contexts by session id (and by key). */
  readonly sessions: LoadedSessions;
  /**
   * Appends queued for a session (by id) and not started yet. The limits a released pin held off are then
   * left to the first of them, which evicts in its own commit, instead of costing a commit of their own.
   */
  readonly appendsWaiting: StringDictionary<number>;
  /**
   * RAM entries (active and tombstones, over all loaded sessions) past which loading a session unloads the
   * least recently active idle ones; they reload from the database when used again.
   */
  readonly maxLoadedEntries: number;
  readonly summarizer: Summarizer;
  readonly embedder: EmbeddingProvider | undefined;
  readonly writes: WriteRetryState;
  readonly embeddings: EmbeddingQueueState;
}

const maxContentChars = 1_000_000;

const maxToolCallIdChars = 512;
const maxToolNameChars = 256;
const maxToolCalls = 256;
const toolCallSchema = z.object({
  id: z.string().min(1).max(maxToolCallIdChars),
  name: z.string().min(1).max(maxToolNameChars),
  arguments: z.record(z.string(), z.unknown()),
});
const metadataSchema = z.record(z.string(), z.unknown()).optional();
export const appendInputSchema = z.discriminatedUnion('role', [
  z.object({
    role: z.enum(['user', 'system']),
    content: z.string().max(maxContentChars),
    metadata: metadataSchema,
    createdAtMs: z.number().int().nonnegative().optional(),
  }),
  z.object({
    role: z.literal('assistant'),
    content: z.string().max(maxContentChars),
    toolCalls: z.array(toolCallSchema).max(maxToolCalls).optional(),
    metadata: metadataSchema,
    createdAtMs: z.number().int().nonnegative().optional(),
  }),
  z.object({
    role: z.literal('tool'),
    content: z.string().max(maxContentChars),
    toolCallId: z.string().min(1).max(maxToolCallIdChars),
    toolName: z.string().min(1).max(maxToolNameChars),
    isError: z.boolean().optional(),
    metadata: metadataSchema,
    createdAtMs: z.number().int().nonnegative().optional(),
  }),
]);

/**
 * A record (metadata, a tool call's arguments) as `appendInputSchema` would return it, for the plain objects
 * whose copy is simply their enumerable string-keyed properties; undefined leaves any other value (a null
 * prototype, symbol keys, an own `__proto__`, not an object at all) to the schema.
 */
function copyPlainRecord(record: unknown): Record<string, unknown> | undefined {
  if (typeof record !== 'object' || record === null) return undefined;
  if (Object.getPrototypeOf(record) !== Object.prototype || Object.hasOwn(record, '__proto__'))
    return undefined;
  if (Object.getOwnPropertySymbols(record).length > 0) return undefined;
  return copyRecord(record as Record<string, unknown>);
}

/**
 * A copy of a plain record (metadata, tool-call arguments: JSON values, string keys), property by property.
 * Not a spread: once a spread's site had seen a few shapes, V8 cloned through its slow path, and every copy
 * got a hidden class of its own, which freezing a pinned view's copy kept (about 160 bytes an entry).
 */
export function copyRecord(record: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(record)) copy[key] = record[key];
  return copy;
}

/**
 * One append input checked against `appendInputSchema`. The inputs of chat turns and of an engage loop's
 * transcript (messages, tool calls with plain arguments, tool results, plain metadata) are checked here
 * directly: through the schema they were the largest share of a 1-client turn's validation (a discriminated
 * union, an object and a record, each copied), and of a durable loop's append of its transcript. The result
 * is the schema's own for every input this path takes (test/memory/append-input.test.ts compares them);
 * anything else, and every failure, goes through the schema.
 */
export function parseAppendInput(input: unknown, index: number): AppendInput {
  const plain = plainAppendInput(input);
  if (plain !== undefined) return plain;
  const result = appendInputSchema.safeParse(input);
  if (!result.success) throw invalid(`invalid memory entry ${index}`, result.error.issues);
  return result.data as AppendInput;
}

function plainAppendInput(input: unknown): AppendInput | undefined {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return undefined;
  const fields = input as Record<string, unknown>;
  const { role, content } = fields;
  if (role !== 'user' && role !== 'system' && role !== 'assistant' && role !== 'tool') return undefined;
  if (typeof content !== 'string' || content.length > maxContentChars) return undefined;
  const out: Record<string, unknown> = { role, content };
  // The schema keeps an optional key given as undefined, and drops the keys it does not know.
  if (role === 'assistant' && 'toolCalls' in fields) {
    if (fields.toolCalls === undefined) out.toolCalls = undefined;
    else {
      const toolCalls = plainToolCalls(fields.toolCalls);
      if (toolCalls === undefined) return undefined;
      out.toolCalls = toolCalls;
    }
  }
  if (role === 'tool') {
    const { toolCallId, toolName } = fields;
    if (!boundedName(toolCallId, maxToolCallIdChars) || !boundedName(toolName, maxToolNameChars))
      return undefined;
    out.toolCallId = toolCallId;
    out.toolName = toolName;
    if ('isError' in fields) {
      if (fields.isError !== undefined && typeof fields.isError !== 'boolean') return undefined;
      out.isError = fields.isError;
    }
  }
  if ('metadata' in fields) {
    if (fields.metadata === undefined) out.metadata = undefined;
    else {
      const metadata = copyPlainRecord(fields.metadata);
      if (metadata === undefined) return undefined;
      out.metadata = metadata;
    }
  }
  if ('createdAtMs' in fields) {
    const { createdAtMs } = fields;
    if (createdAtMs !== undefined && !(Number.isSafeInteger(createdAtMs) && (createdAtMs as number) >= 0))
      return undefined;
    out.createdAtMs = createdAtMs;
  }
  return out as unknown as AppendInput;
}

/** A string of 1 to `maxChars` characters, as `z.string().min(1).max(maxChars)` accepts. */
const boundedName = (value: unknown, maxChars: number): value is string =>
  typeof value === 'string' && value.length >= 1 && value.length <= maxChars;

/**
 * The tool calls as `toolCallSchema`'s array returns them (each call's id, name and a copy of its arguments),
 * for an array of at most `maxToolCalls` plain calls with plain-record arguments; undefined leaves anything
 * else to the schema.
 */
function plainToolCalls(value: unknown): ModelToolCall[] | undefined {
  if (!Array.isArray(value) || value.length > maxToolCalls) return undefined;
  const calls: ModelToolCall[] = [];
  for (const call of value as unknown[]) {
    if (typeof call !== 'object' || call === null || Array.isArray(call)) return undefined;
    const { id, name, arguments: args } = call as Record<string, unknown>;
    if (!boundedName(id, maxToolCallIdChars) || !boundedName(name, maxToolNameChars)) return undefined;
    const copied = copyPlainRecord(args);
    if (copied === undefined) return undefined;
    calls.push({ id, name, arguments: copied });
  }
  return calls;
}

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

export function invalid(
  what: string,
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>,
): UserInputError {
  return new UserInputError({
    code: ErrorCodes.invalidRequest,
    message: `${what}: ${formatZodIssues(issues)}`,
  });
}

const sessionKeyShape = /^agent:[^:]+:.+$/;

/** `sessionRefSchema` spelled out for valid refs: every memory call checks one, zod is several times slower. */
function isValidRef(ref: SessionRef): boolean {
  if (typeof ref !== 'object' || ref === null) return false;
  const { sessionId, sessionKey, agentId } = ref;
  return (
    typeof sessionId === 'string' &&
    sessionId.length >= 1 &&
    sessionId.length <= 256 &&
    typeof agentId === 'string' &&
    agentId.length >= 1 &&
    agentId.length <= 128 &&
    typeof sessionKey === 'string' &&
    sessionKey.length <= 512 &&
    sessionKeyShape.test(sessionKey) &&
    sessionKey.slice(6, sessionKey.indexOf(':', 6)) === agentId
  );
}

export function checkRef(ref: SessionRef): SessionRef {
  if (isValidRef(ref)) return { sessionId: ref.sessionId, sessionKey: ref.sessionKey, agentId: ref.agentId };
  // The schema words the error.
  const parsed = sessionRefSchema.safeParse(ref);
  if (!parsed.success) throw invalid('invalid session reference', parsed.error.issues);
  return parsed.data;
}

/** Builds the shared state of one memory service (and loads sqlite-vec when embeddings are on). */
export function createMemoryContext(options: MemoryServiceOptions): MemoryContext {
  const config = memoryConfigSchema.parse(options.config ?? {});
  const { db, bus } = options;
  const clock = options.clock ?? systemClock;
  const logger = (options.logger ?? silentLogger).child({ component: 'memory' });
  const vectorSupport = { sqliteVec: false };
  const embedder = options.embedder ?? embedderFromConfig(config, options);
  const ctx: MemoryContext = {
    config,
    db,
    bus,
    clock,
    newId: options.idGenerator ?? createIdGenerator({ now: () => clock.now() }),
    logger,
    ltm: createLtmStore(db, vectorSupport),
    mutex: createKeyedMutex(),
    sessions: new LoadedSessions(),
    appendsWaiting: new StringDictionary(),
    maxLoadedEntries: config.maxLoadedEntries,
    summarizer: createSummarizer({
      model: options.model,
      maxTokens: config.summaryMaxTokens,
      timeoutMs: config.summaryTimeoutMs,
      logger,
    }),
    embedder,
    writes: createWriteRetryState(config, () => void retryWrites(ctx)),
    embeddings: { pending: [], draining: undefined },
  };
  if (embedder && db.dialect === 'sqlite') vectorSupport.sqliteVec = loadSqliteVec(db, logger);
  return ctx;
}
