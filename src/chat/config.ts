import { z } from 'zod';
import { defaultMaxQueuedTurns, defaultMaxQueuedTurnsPerSession } from './service/queue.js';

/**
 * `chat:` in agentd.yaml. A message that would wait behind a running turn of its session is refused with
 * QUEUE_FULL (retryable) past either bound, before it is stored; `/stop` never waits, so it always works.
 */
export const chatConfigSchema = z.object({
  /** Turns accepted and not started yet per session key. */
  maxQueuedTurnsPerSession: z.number().int().positive().default(defaultMaxQueuedTurnsPerSession),
  /** Turns accepted and not started yet across all session keys. */
  maxQueuedTurns: z.number().int().positive().default(defaultMaxQueuedTurns),
  /**
   * How long a process's chat lease holds after a renewal (renewed every third of it). Processes of other
   * hosts sharing the database leave its runs and waiting messages to it while the lease holds, and take them
   * once it lapsed (docs/storage.md, "Crash windows in a chat turn").
   */
  ownerLeaseMs: z.number().int().min(300).default(30_000),
});

export type ChatConfig = z.infer<typeof chatConfigSchema>;
