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
 * What a caller commits with an append, through `tx` only (the commit is not ambient: a statement on the
 * database itself would not join it; on SQLite it would wait for it forever). It must issue all its
 * statements before it awaits anything (`Promise.all`, not one `await` after another), and it must not fail
 * except because one of them fails: a check belongs in the statement. On Postgres it runs once against an
 * executor that records the statements (RecordedAlso): they are sent with the commit's own, folded into its
 * INSERT where they allow it, and their answers come once the commit is stored; a statement issued later is
 * refused. On SQLite it runs inside the commit's transaction. A conflict it fails with (an error coded
 * CONFLICT: the rows are not as the caller expected, as for SessionEndedError) refuses the commit: the append
 * fails with it, and memory neither degrades nor queues the write to try again.
 */
export type AlsoInTransaction = (tx: SqlExecutor) => Promise<void>;

export interface SummarizeOptions {
  /** Most entries folded into the summary; default `config.summarizeBatch`. */
  maxEntries?: number;
  /** Active entries that must stay untouched at the end of the context; default 1. */
  keepLatest?: number;
  reason?: string;
  signal?: AbortSignal;
  /**
   * The summary must be committed, not queued in RAM while the database cannot be written: for a caller that
   * tells someone it is done (`chat.compact`). Fails with STORE_UNAVAILABLE instead, summarizing nothing.
   */
  requireCommit?: boolean;
}

export interface ArchiveOptions {
  /**
   * Committed or failed with STORE_UNAVAILABLE, never queued in RAM: for a caller that answers that the
   * session was archived (`sessions.reset`, `sessions.delete`).
   */
  requireCommit?: boolean;
  /** Commits in the archive's transaction (the session record's own archiving); not run when nothing is archived. */
  also?: AlsoInTransaction;
}

export interface SummarizeResult {
  summary: MemoryEntry | undefined;
  summarizedIds: number[];
  method: 'model' | 'extractive' | undefined;
  /** Set when nothing was summarized. */
  skipped?: 'nothing-to-summarize' | 'pinned' | 'session-gone';
}
