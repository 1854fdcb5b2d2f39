import pg from 'pg';
import { z } from 'zod';
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

const channelPattern = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * A dedicated LISTEN connection (never a pooled one: LISTEN belongs to a session, and a pooled client
 * would be handed to other queries). Reconnects with backoff; after a reconnect it fires one wake-up so
 * nothing submitted while it was down waits for the poll interval.
 */
export function createPostgresNotifier(options: PostgresNotifierOptions): WorkNotifier {
  if (!channelPattern.test(options.channel))
    throw new RangeError(`invalid NOTIFY channel name "${options.channel}"`);
  const baseDelayMs = options.reconnectDelayMs ?? 500;
  let client: pg.Client | undefined;
  let closed = false;
  let delayMs = baseDelayMs;
  let retryTimer: NodeJS.Timeout | undefined;
  let markListening: () => void = () => undefined;
  const listening = new Promise<void>((resolve) => {
    markListening = resolve;
  });

  const onNotification = (message: pg.Notification) => {
    if (message.channel !== options.channel || !message.payload) return;
    let parsed: z.infer<typeof payloadSchema>;
    try {
      const result = payloadSchema.safeParse(JSON.parse(message.payload));
      if (!result.success) return;
      parsed = result.data;
    } catch {
      return;
    }
    if (parsed.o === options.instanceId) return;
    if (parsed.t === 'wake') options.onWake();
    else options.onTerminal(parsed.id);
  };

  const connect = async () => {
    if (closed) return;
    const next = new pg.Client({ connectionString: options.connectionString });
    next.on('notification', onNotification);
    next.on('error', (error) => {
      options.logger.warn({ err: error }, 'work queue LISTEN connection failed; reconnecting');
      scheduleReconnect(next);
    });
    next.on('end', () => scheduleReconnect(next));
    try {
      await next.connect();
      await next.query(`LISTEN ${options.channel}`);
      if (closed) {
        await next.end().catch(() => undefined);
        return;
      }
      client = next;
      delayMs = baseDelayMs;
      markListening();
      options.onWake();
    } catch (error) {
      options.logger.warn({ err: error }, 'work queue could not LISTEN; retrying');
      next.removeAllListeners('end');
      await next.end().catch(() => undefined);
      scheduleReconnect(undefined);
    }
  };

  const scheduleReconnect = (failed: pg.Client | undefined) => {
    if (closed || retryTimer) return;
    if (failed && client !== failed && client !== undefined) return;
    client = undefined;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      void connect();
    }, delayMs);
    retryTimer.unref();
    delayMs = Math.min(delayMs * 2, 30_000);
  };

  const ready = connect();

  return {
    whenListening: () => listening,
    async close() {
      closed = true;
      markListening();
      if (retryTimer) clearTimeout(retryTimer);
      await ready;
      const current = client;
      client = undefined;
      if (current) {
        current.removeAllListeners('end');
        await current.end().catch(() => undefined);
      }
    },
  };
}
