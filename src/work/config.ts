import { z } from 'zod';

/** Awareness digest options (seed 002's `[faculty.awareness]`). */
export const awarenessConfigSchema = z
  .object({
    enabled: z.boolean().default(true),
    lookbackMs: z
      .number()
      .int()
      .positive()
      .default(24 * 60 * 60 * 1000),
    maxRunning: z.number().int().min(0).default(10),
    maxRecentCompleted: z.number().int().min(0).default(20),
    maxRecentFindings: z.number().int().min(0).default(20),
    /** Upper bound of the rendered digest, estimated at four characters per token. */
    maxTokens: z.number().int().min(50).default(1500),
  })
  .default({
    enabled: true,
    lookbackMs: 24 * 60 * 60 * 1000,
    maxRunning: 10,
    maxRecentCompleted: 20,
    maxRecentFindings: 20,
    maxTokens: 1500,
  });

export type AwarenessConfig = z.infer<typeof awarenessConfigSchema>;

/** Options of the durable work queue, mounted under `work:` in agentd.yaml. */
export const workConfigSchema = z
  .object({
    /** How long a claim lasts without a heartbeat; a worker that dies loses its item after this. */
    leaseMs: z.number().int().min(100).default(30_000),
    maxAttempts: z.number().int().min(1).default(3),
    /** Retry delay after the n-th failed attempt: `min(backoffMaxMs, backoffBaseMs · 2^(n−1))`. */
    backoffBaseMs: z.number().int().min(0).default(1_000),
    backoffMaxMs: z
      .number()
      .int()
      .min(0)
      .default(5 * 60 * 1000),
    /** Child work deeper than this is refused (a top-level item has depth 0). */
    maxDepth: z.number().int().min(0).default(5),
    /** Children one parent may have. */
    maxChildren: z.number().int().min(1).default(20),
    /**
     * Fallback re-check interval of `waitForWork` when no wake-up arrives (no LISTEN connection, or another
     * process on SQLite). Never below one second.
     */
    pollIntervalMs: z.number().int().min(1_000).default(2_000),
    awareness: awarenessConfigSchema,
  })
  .default({
    leaseMs: 30_000,
    maxAttempts: 3,
    backoffBaseMs: 1_000,
    backoffMaxMs: 5 * 60 * 1000,
    maxDepth: 5,
    maxChildren: 20,
    pollIntervalMs: 2_000,
    awareness: awarenessConfigSchema.parse(undefined),
  });

export type WorkConfig = z.infer<typeof workConfigSchema>;
