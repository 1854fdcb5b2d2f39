import type { Bus, BusEvent } from '../bus/index.js';
import type { Logger } from '../util/index.js';
import { silentLogger } from '../util/index.js';
import type { EventInput, EventStore } from './event-store.js';

export interface EventRecorderOptions {
  bus: Bus;
  events: EventStore;
  logger?: Logger;
  /**
   * Event types not worth keeping. Entries ending in `:*` match a subsystem. Default: streaming deltas,
   * which are many per run and fully represented by `run:finished`.
   */
  exclude?: ReadonlyArray<string>;
  /**
   * How long events gather before they are written in one transaction (default 0: what one synchronous
   * stretch of code published). Each transaction is a commit; a chat turn publishes its events across many
   * event-loop turns, so a few milliseconds here make one commit of what would be several. The audit log is
   * not what acknowledges a message: nothing waits for these writes but `flush` and `stop`.
   */
  batchDelayMs?: number;
}

export interface EventRecorder {
  /** Resolves when everything published so far is written. */
  flush(): Promise<void>;
  /** Unsubscribes and writes what is buffered. */
  stop(): Promise<void>;
}

export const defaultUnrecordedEventTypes: ReadonlyArray<string> = ['run:text-delta'];

/**
 * Writes bus events to the audit log. Bus delivery is synchronous and writes are not, so events are
 * buffered and written in batches, one batch at a time, which keeps the log in publish order.
 */
export function createEventRecorder(options: EventRecorderOptions): EventRecorder {
  const logger = (options.logger ?? silentLogger).child({ component: 'store' });
  const exclude = options.exclude ?? defaultUnrecordedEventTypes;
  const excludedTypes = new Set(exclude.filter((type) => !type.endsWith(':*')));
  const excludedPrefixes = exclude.filter((type) => type.endsWith(':*')).map((type) => type.slice(0, -1));
  let buffer: EventInput[] = [];
  let writing: Promise<void> = Promise.resolve();
  const batchDelayMs = options.batchDelayMs ?? 0;
  let scheduled = false;
  let timer: NodeJS.Timeout | undefined;

  const write = () => {
    scheduled = false;
    if (timer) {
      clearTimeout(timer);
      timer = undefined;
    }
    const batch = buffer;
    buffer = [];
    if (batch.length === 0) return writing;
    writing = writing.then(async () => {
      try {
        await options.events.appendMany(batch);
      } catch (error) {
        // Publishing an error event here could feed back into the recorder; the log is the outlet.
        logger.error({ err: error, lost: batch.length }, 'could not write events to the audit log');
      }
    });
    return writing;
  };

  const unsubscribe = options.bus.subscribe({}, (event: BusEvent) => {
    if (excludedTypes.has(event.type) || excludedPrefixes.some((prefix) => event.type.startsWith(prefix)))
      return;
    const input: EventInput = { type: event.type, at: event.at, data: event.data };
    if (event.sessionKey !== undefined) input.sessionKey = event.sessionKey;
    if (event.agentId !== undefined) input.agentId = event.agentId;
    if (event.workItemId !== undefined) input.workItemId = event.workItemId;
    if (event.runId !== undefined) input.runId = event.runId;
    buffer.push(input);
    if (!scheduled) {
      scheduled = true;
      if (batchDelayMs > 0) timer = setTimeout(write, batchDelayMs);
      else queueMicrotask(write);
    }
  });

  return {
    flush: () => write(),
    async stop() {
      unsubscribe();
      await write();
    },
  };
}
