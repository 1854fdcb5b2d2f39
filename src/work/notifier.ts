import { z } from 'zod';
import { createPostgresListener } from '../store/index.js';
import type { Logger } from '../util/index.js';

export interface WorkNotifier {
  /** Resolves once LISTEN is active (or the notifier was closed first). */
  whenListening(): Promise<void>;
  close(): Promise<void>;
}

export interface PostgresNotifierOptions {
  connectionString: string;
  channel: string;
  /** This process's queue id: its own notifications are ignored (they were handled in-process). */
  instanceId: string;
  logger: Logger;
  onWake(): void;
  onTerminal(workItemId: string): void;
  /** First reconnect delay after the LISTEN connection drops; doubles up to 30 s. */
  reconnectDelayMs?: number;
}

const payloadSchema = z.union([
  z.object({ o: z.string(), t: z.literal('wake') }),
  z.object({ o: z.string(), t: z.literal('terminal'), id: z.string() }),
]);

/**
 * The work queue's cross-process wake-ups. After every LISTEN, the first and each after a reconnect, it fires
 * one wake-up so nothing submitted while it was down waits for the poll interval.
 */
export function createPostgresNotifier(options: PostgresNotifierOptions): WorkNotifier {
  return createPostgresListener({
    connectionString: options.connectionString,
    channel: options.channel,
    logger: options.logger,
    purpose: 'work queue',
    ...(options.reconnectDelayMs === undefined ? {} : { reconnectDelayMs: options.reconnectDelayMs }),
    onListening: options.onWake,
    onNotification: (payload) => {
      if (!payload) return;
      let parsed: z.infer<typeof payloadSchema>;
      try {
        const result = payloadSchema.safeParse(JSON.parse(payload));
        if (!result.success) return;
        parsed = result.data;
      } catch {
        return;
      }
      if (parsed.o === options.instanceId) return;
      if (parsed.t === 'wake') options.onWake();
      else options.onTerminal(parsed.id);
    },
  });
}
