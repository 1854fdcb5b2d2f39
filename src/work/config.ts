import { z } from 'zod';

/** Awareness digest options. */
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

/** The kind of the memory manager's maintenance passes, the runtime's own background work. */
export const memoryMaintenanceKind = 'memory.maintain';

/** System work kinds unless `work.systemKinds` says otherwise. */
export const defaultSystemWorkKinds: ReadonlyArray<string> = [memoryMaintenanceKind];

/** Which work a listing shows: people's and agents' work (the default), system work only, or both. */
export const workClasses = ['user', 'system', 'all'] as const;
export type WorkClass = (typeof workClasses)[number];

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
    /**
     * Postgres: a worker's completion statement also claims as many ready items for it as it completes,
     * so its next claim needs no statement of its own (see docs/work.md, "Claim-ahead").
     */
    claimAhead: z.boolean().default(true),
    /**
     * A submission made while a worker of this process waits for work it would take is inserted already
     * started under that worker's lease and handed to it, without a claim statement (see docs/work.md,
     * "Hand-off to an idle worker").
     */
    handOffToIdle: z.boolean().default(true),
    /**
     * Kinds of system work (the runtime's own upkeep, such as memory maintenance). They run like any other
     * work but are left out of `work list`, `work.list` and the awareness digest unless asked for.
     */
    systemKinds: z.array(z.string().min(1)).default([...defaultSystemWorkKinds]),
    /**
     * Days an item is kept after it ended (fractions allowed); 0 keeps ended items for ever. Pruned at start
     * and hourly (see docs/work.md, "Retention").
     */
    retainEndedDays: z.number().nonnegative().default(30),
    /**
     * Days an ended item of a system kind is kept, when shorter than `retainEndedDays` (or that is 0); 0 leaves
     * system work to `retainEndedDays`. Maintenance every 30 s would otherwise keep about 86,000 rows.
     */
    retainEndedSystemDays: z.number().nonnegative().default(1),
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
    claimAhead: true,
    handOffToIdle: true,
    systemKinds: [...defaultSystemWorkKinds],
    retainEndedDays: 30,
    retainEndedSystemDays: 1,
    awareness: awarenessConfigSchema.parse(undefined),
  });

export type WorkConfig = z.infer<typeof workConfigSchema>;

/** The list filter that shows one class of work, given the system kinds. */
export function workClassFilter(
  workClass: WorkClass,
  systemKinds: ReadonlyArray<string>,
): { excludeKinds?: ReadonlyArray<string>; kinds?: ReadonlyArray<string> } {
  if (workClass === 'all') return {};
  return workClass === 'system' ? { kinds: systemKinds } : { excludeKinds: systemKinds };
}
