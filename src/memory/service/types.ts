import type { Bus } from '../../bus/index.js';
import type { LanguageModel } from '../../model/index.js';
import type { SqlDatabase, SqlExecutor } from '../../store/index.js';
import type { Clock, IdGenerator, Logger } from '../../util/index.js';
import type { MemoryConfigInput } from '../config.js';
import type { EmbeddingProvider } from '../embeddings.js';
import type { MemoryEntry } from '../types.js';

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

/**
 * Runs inside the transaction that commits an append, and does all its database work through `tx` (the
 * transaction is not ambient: a statement on the database itself would not join it; on SQLite it would wait
 * for it forever). It should issue all its statements before it awaits any answer (`Promise.all`, not one
 * `await` after another): on Postgres they then leave with BEGIN and the entries' INSERT in one round trip,
 * and COMMIT follows their answers; a statement issued later costs a round trip of its own.
 */
export type AlsoInTransaction = (tx: SqlExecutor) => Promise<void>;

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
