import type { ModelToolCall } from '../model/index.js';

/** A session instance: `sessionId` is the row of the store's `sessions` table, `sessionKey` its stable key. */
export interface SessionRef {
  sessionId: string;
  /** `agent:<agentId>:<key>` */
  sessionKey: string;
  agentId: string;
}

export type MemoryRole = 'user' | 'assistant' | 'system' | 'tool';
export type MemoryKind = 'entry' | 'summary';
/**
 * - `active`: in the RAM context, sent to the model.
 * - `tombstone`: the marker left in RAM where an entry was evicted or summarized (`relatedTo` points at it).
 * - `summarized` / `evicted`: the original entry, moved out of RAM into long-term memory.
 */
export type MemoryState = 'active' | 'tombstone' | 'summarized' | 'evicted';

export interface MemoryEntry {
  /** Per-session-key counter, never reused for the same key. */
  memoryId: number;
  /** Global address `<sessionKey>#<memoryId>`. */
  address: string;
  sessionId: string;
  sessionKey: string;
  agentId: string;
  kind: MemoryKind;
  role: MemoryRole;
  state: MemoryState;
  content: string;
  /** Tombstones: the entry they replaced. */
  relatedTo: number | null;
  /** Summaries: the entries they fold, oldest first. */
  sourceIds?: number[];
  /** Assistant entries that called tools. */
  toolCalls?: ModelToolCall[];
  /** Tool-result entries. */
  toolCallId?: string;
  toolName?: string;
  isError?: boolean;
  /** Estimated tokens of the entry as the model sees it. */
  tokens: number;
  createdAtMs: number;
  /** Set when the session instance was archived (`/new`, reset). */
  archivedAtMs: number | null;
  metadata?: Record<string, unknown>;
}

/** Where a user, assistant or system entry sits, without its content (`MemoryService.recentMessageMarks`). */
export interface MessageMark {
  address: string;
  sessionKey: string;
  agentId: string;
  role: 'user' | 'assistant' | 'system';
  createdAtMs: number;
  metadata?: Record<string, unknown> | undefined;
}

/** What a caller appends. Tool data is validated for consistency with the role. */
export type AppendInput =
  | { role: 'user' | 'system'; content: string; metadata?: Record<string, unknown>; createdAtMs?: number }
  | {
      role: 'assistant';
      content: string;
      toolCalls?: ModelToolCall[];
      metadata?: Record<string, unknown>;
      createdAtMs?: number;
    }
  | {
      role: 'tool';
      content: string;
      toolCallId: string;
      toolName: string;
      isError?: boolean;
      metadata?: Record<string, unknown>;
      createdAtMs?: number;
    };

/** Where an item came from, as reported in Spiderweb `memory.query` / `memory.recall` items. */
export type MemorySource = 'ram' | 'ltm' | 'archive';

/** Spiderweb item shapes, plus additive fields `sessionKey`, `address`, `created_at_ms`. */
export interface MemorySummaryItem {
  kind: 'summary';
  source: MemorySource;
  id: number;
  source_id: number | null;
  created_at_ms: number;
  text: string;
  sessionKey: string;
  address: string;
  source_ids: number[];
}

export interface MemoryEntryItem {
  kind: 'entry';
  source: MemorySource;
  id: number;
  role: MemoryRole;
  state: MemoryState;
  related_to: number | null;
  content: string;
  created_at_ms: number;
  sessionKey: string;
  address: string;
  /** Present (true) when `content` was cut because full detail was not requested. */
  truncated?: boolean;
}

export type MemoryItem = MemorySummaryItem | MemoryEntryItem;

export interface RecallOptions {
  agentId: string;
  sessionKey?: string;
  limit?: number;
  includeArchived?: boolean;
  includeFull?: boolean;
}

export interface QueryOptions {
  agentId: string;
  sessionKey?: string;
  /** Words matched as a phrase by the full-text index (stemmed, case-insensitive). */
  topic?: string;
  /** Numbers need `sessionKey`; strings are global addresses `<sessionKey>#<n>`. */
  memoryIds?: ReadonlyArray<number | string>;
  kind?: 'summary' | 'entry' | 'all';
  limit?: number;
  includeArchived?: boolean;
}

export interface SearchOptions {
  agentId: string;
  query: string;
  limit?: number;
  sessionKey?: string;
  includeArchived?: boolean;
  kind?: 'summary' | 'entry' | 'all';
  /** `auto` = hybrid when an embedder is configured, else full text. */
  mode?: 'auto' | 'fts' | 'hybrid';
  /** Leave out these addresses (e.g. what is already in the prompt). */
  excludeAddresses?: ReadonlySet<string>;
  /** Most rows the full-text ranking may touch; defaults to (and is capped at) `recall.maxScoredRows`. */
  maxScoredRows?: number;
}

export interface SearchHit {
  address: string;
  sessionKey: string;
  memoryId: number;
  kind: MemoryKind;
  role: MemoryRole;
  state: MemoryState;
  content: string;
  /** Higher is better. BM25 (negated rank) in `fts` mode, fused reciprocal-rank score in `hybrid` mode. */
  score: number;
  createdAtMs: number;
  source: MemorySource;
  mode: 'fts' | 'hybrid';
}

export interface HistoryOptions {
  limit?: number;
  beforeMemoryId?: number;
  includeArchived?: boolean;
}

export interface HistoryEntry {
  memoryId: number;
  address: string;
  sessionId: string;
  role: 'user' | 'assistant';
  content: string;
  state: MemoryState;
  createdAtMs: number;
  archived: boolean;
}

export type MemoryEventKind = 'summarized' | 'evicted' | 'snapshot' | 'archived' | 'restored';

/** Payload of the `memory:event` bus event (also persisted in `memory_events`). */
export interface MemoryEventPayload {
  sessionKey: string;
  sessionId: string;
  agentId: string;
  kind: MemoryEventKind;
  /** Entries affected. */
  count: number;
  tokensBefore: number;
  tokensAfter: number;
  memoryIds: number[];
  message: string;
  reason?: string;
}

export interface SessionStats {
  sessionId: string;
  sessionKey: string;
  agentId: string;
  activeEntries: number;
  activeTokens: number;
  tombstones: number;
  pinned: number;
  nextMemoryId: number;
  lastActiveMs: number;
}

export interface PinLease {
  memoryIds: number[];
  release(): void;
}

export interface ArchiveResult {
  sessionId: string;
  /** Null when the session instance is unknown to memory. */
  sessionKey: string | null;
  archived: boolean;
  snapshotId: string | null;
  entryCount: number;
}

export interface SnapshotResult {
  snapshotId: string;
  entryCount: number;
  summaryCount: number;
  tombstoneCount: number;
  activeTokens: number;
}
