import { z } from 'zod';

const dayMs = 24 * 60 * 60 * 1000;

/** OpenAI-compatible `/embeddings`, or the deterministic offline hashing embedder (tests, benchmarks). */
export const memoryEmbeddingsConfigSchema = z
  .object({
    /** `none` keeps search keyword-only (BM25). */
    provider: z.enum(['none', 'openai', 'hash']).default('none'),
    /** Base URL of an OpenAI-compatible server; `/embeddings` is appended. */
    baseUrl: z.string().url().default('https://api.openai.com/v1'),
    model: z.string().min(1).default('text-embedding-3-small'),
    /** Name of the environment variable holding the API key (never the key itself). */
    apiKeyEnv: z.string().min(1).default('OPENAI_API_KEY'),
    /** Requested vector size: the hashing embedder uses it (default 256); sent to OpenAI-compatible servers when set. */
    dimensions: z.number().int().min(8).max(4096).optional(),
    timeoutMs: z.number().int().positive().default(15_000),
    batchSize: z.number().int().min(1).max(2048).default(64),
    /** Weight of the vector ranking in reciprocal-rank fusion (the text ranking has weight 1). */
    vectorWeight: z.number().min(0).max(10).default(1),
    /** How many candidates each ranking contributes before fusion. */
    candidateCount: z.number().int().min(1).max(1000).default(50),
  })
  .default({
    provider: 'none',
    baseUrl: 'https://api.openai.com/v1',
    model: 'text-embedding-3-small',
    apiKeyEnv: 'OPENAI_API_KEY',
    timeoutMs: 15_000,
    batchSize: 64,
    vectorWeight: 1,
    candidateCount: 50,
  });

export const memoryConfigSchema = z
  .object({
    /** Active (non-tombstone) entries kept in a session's RAM context before the oldest are evicted. */
    maxActiveEntries: z.number().int().min(2).default(64),
    /** Estimated tokens of active entries before the oldest are evicted. */
    maxActiveTokens: z.number().int().min(64).default(8_000),
    /**
     * Once an append passes a limit, the oldest entries are evicted until active entries and tokens are at
     * most this fraction of their limits (1 evicts just enough to fit). Room for several turns per eviction
     * means one eviction commit every few turns instead of one per append.
     */
    evictDownToRatio: z.number().gt(0).max(1).default(0.875),
    /** Entries folded into one summary. */
    summarizeBatch: z.number().int().min(1).default(8),
    /** Tombstones kept in RAM per session (all of them stay in the database). */
    maxRamTombstones: z.number().int().min(0).default(256),
    /**
     * Entries (active and tombstones) loaded in RAM over all sessions. Past it the least recently active idle
     * sessions are unloaded and reload from the database when next used. A session at the default limits
     * holds up to 64 active entries and 256 tombstones (about 100 KiB); 32,768 entries are roughly 10–15 MiB.
     */
    maxLoadedEntries: z.number().int().min(1).default(32_768),
    /** Upper bound of a model-written summary. */
    summaryMaxTokens: z.number().int().min(16).default(300),
    /** Budget of the model call that writes a summary; on timeout the extractive fallback is used. */
    summaryTimeoutMs: z.number().int().positive().default(30_000),
    managerIntervalMs: z.number().int().min(100).default(30_000),
    /** First wait before retrying the database after a failed write; doubles up to `maxWriteRetryMs`. */
    writeRetryMs: z.number().int().min(1).default(500),
    maxWriteRetryMs: z.number().int().min(1).default(15_000),
    thresholds: z
      .object({
        /** The manager summarizes when active entries or tokens pass this fraction of their limit. */
        summarizeRatio: z.number().gt(0).max(1).default(0.75),
        /** The manager summarizes a session idle for this long down to `keepRecentEntries`. */
        staleAfterMs: z
          .number()
          .int()
          .positive()
          .default(30 * 60 * 1000),
        keepRecentEntries: z.number().int().min(0).default(8),
        maxSummariesPerTick: z.number().int().min(1).default(2),
        /** RAM contexts idle this long are dropped from the process (they reload from the database). */
        unloadIdleAfterMs: z
          .number()
          .int()
          .positive()
          .default(6 * 60 * 60 * 1000),
      })
      .default({
        summarizeRatio: 0.75,
        staleAfterMs: 30 * 60 * 1000,
        keepRecentEntries: 8,
        maxSummariesPerTick: 2,
        unloadIdleAfterMs: 6 * 60 * 60 * 1000,
      }),
    retention: z
      .object({
        /** Snapshots kept per session key (newest first). */
        snapshotsPerSession: z.number().int().min(1).default(24),
        snapshotMaxAgeMs: z
          .number()
          .int()
          .positive()
          .default(30 * dayMs),
        /** Memory events older than this are deleted. */
        eventMaxAgeMs: z
          .number()
          .int()
          .positive()
          .default(30 * dayMs),
        /** Archived session instances kept per session key; null keeps all. */
        archivedSessionsPerKey: z.number().int().min(0).nullable().default(null),
        /** Archived session instances older than this (by archive time) are deleted; null keeps them. */
        archivedMaxAgeMs: z.number().int().positive().nullable().default(null),
      })
      .default({
        snapshotsPerSession: 24,
        snapshotMaxAgeMs: 30 * dayMs,
        eventMaxAgeMs: 30 * dayMs,
        archivedSessionsPerKey: null,
        archivedMaxAgeMs: null,
      }),
    recall: z
      .object({
        defaultLimit: z.number().int().min(1).default(25),
        maxLimit: z.number().int().min(1).default(128),
        /** Without `includeFull`, entry content is cut to this many characters. */
        previewChars: z.number().int().min(16).default(280),
        searchDefaultLimit: z.number().int().min(1).default(8),
        /** Default budget of `recallForPrompt`. */
        promptMaxTokens: z.number().int().min(16).default(600),
        /**
         * Full-text weight of a match in the two previous conversational turns, relative to a match in the
         * entry itself (1). Chosen on half of the LoCoMo conversations (bench/locomo.bench.ts).
         */
        contextWeights: z
          .object({ before: z.number().min(0).max(1).default(0.5) })
          .strict()
          .default({ before: 0.5 }),
        /**
         * Share of a matching turn's score passed to the turns 1, 2, 3… MemoryIDs away in the same session
         * key (empty: none). Chosen on half of the LoCoMo conversations (bench/locomo.bench.ts).
         */
        neighbourWeights: z.array(z.number().min(0).max(1)).max(8).default([0.2, 0.1, 0.05]),
        /** Full-text candidates ranked before neighbour smoothing and fusion. */
        candidateCount: z.number().int().min(1).max(1000).default(100),
        /**
         * Most rows one full-text search ranks on SQLite, where ranking costs about a microsecond a row:
         * beyond it the commonest query terms are left out, then only the newest matches are ranked.
         */
        maxScoredRows: z.number().int().min(100).default(5_000),
        /**
         * The same bound for automatic recall (`recallForPrompt`), which runs before every chat turn's model
         * call: a best-effort hint that should cost a fraction of the turn. 200 keeps LoCoMo recall@10 at
         * 68.8% (75.6% at 1,000, 64.5% at 100; bench/results/locomo.md).
         */
        promptMaxScoredRows: z.number().int().min(20).default(200),
        /**
         * Full-text candidates automatic recall smooths over neighbours (`candidateCount` for it) while its
         * terms fit the row budget: 20 ranks LoCoMo as 100 does. Past the budget the newest matches are listed
         * as they are, without smoothing.
         */
        promptCandidates: z.number().int().min(1).max(1000).default(20),
        /**
         * How long a chat session's automatic recall block serves a message sent again with the same text.
         * Every other message searches for itself, unless searches have taken more than a tenth of the time,
         * when a session keeps its last block (the chat service's `recallRefreshMs`; 0: every turn searches,
         * unpaced).
         */
        promptReuseMs: z.number().int().min(0).max(3_600_000).default(2_000),
      })
      .default({
        defaultLimit: 25,
        maxLimit: 128,
        previewChars: 280,
        searchDefaultLimit: 8,
        promptMaxTokens: 600,
        contextWeights: { before: 0.5 },
        neighbourWeights: [0.2, 0.1, 0.05],
        candidateCount: 100,
        maxScoredRows: 5_000,
        promptMaxScoredRows: 200,
        promptCandidates: 20,
        promptReuseMs: 2_000,
      }),
    embeddings: memoryEmbeddingsConfigSchema,
  })
  .strict();

export type MemoryConfig = z.infer<typeof memoryConfigSchema>;
export type MemoryConfigInput = z.input<typeof memoryConfigSchema>;
export type MemoryEmbeddingsConfig = z.infer<typeof memoryEmbeddingsConfigSchema>;
