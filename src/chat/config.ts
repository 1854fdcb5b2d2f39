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
});

export type ChatConfig = z.infer<typeof chatConfigSchema>;
