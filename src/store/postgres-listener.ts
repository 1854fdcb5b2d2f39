import type pg from 'pg';
import type { Logger } from '../util/index.js';
import { pgDriver } from './pg-driver.js';

export interface PostgresListener {
  /** Resolves once LISTEN is active (or the listener was closed first). */
  whenListening(): Promise<void>;
  /** Whether notifications are heard now: false before the first LISTEN, while reconnecting and once closed. */
  listening(): boolean;
  close(): Promise<void>;
}

export interface PostgresListenerOptions {
  connectionString: string;
  channel: string;
  logger: Logger;
  /** Who listens, for the log lines ("work queue", "session store"). */
  purpose: string;
  onNotification(payload: string): void;
  /**
   * After every LISTEN, the first and each one after a reconnect: what was notified while the connection was
   * down is lost, so a listener that keeps state must treat it as unknown.
   */
  onListening(): void;
  /** First reconnect delay after the connection drops; doubles up to 30 s. */
  reconnectDelayMs?: number;
}

const channelPattern = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * A dedicated LISTEN connection (never a pooled one: LISTEN belongs to a session, and a pooled client would
 * be handed to other queries). Reconnects with backoff.
 */
export function createPostgresListener(options: PostgresListenerOptions): PostgresListener {
  if (!channelPattern.test(options.channel))
    throw new RangeError(`invalid NOTIFY channel name "${options.channel}"`);
  const baseDelayMs = options.reconnectDelayMs ?? 500;
  let client: pg.Client | undefined;
  let closed = false;
  let delayMs = baseDelayMs;
  let retryTimer: NodeJS.Timeout | undefined;
  let markListening: () => void = () => undefined;
  const firstListen = new Promise<void>((resolve) => {
    markListening = resolve;
  });

  const connect = async () => {
    if (closed) return;
    const next = new (pgDriver().Client)({ connectionString: options.connectionString });
    next.on('notification', (message) => {
      if (message.channel === options.channel) options.onNotification(message.payload ?? '');
    });
    next.on('error', (error) => {
      options.logger.warn({ err: error }, `${options.purpose} LISTEN connection failed; reconnecting`);
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
      options.onListening();
    } catch (error) {
      options.logger.warn({ err: error }, `${options.purpose} could not LISTEN; retrying`);
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
    whenListening: () => firstListen,
    listening: () => client !== undefined,
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
