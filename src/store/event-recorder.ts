import type { Bus, BusEvent } from '../bus/index.js';
import type { Logger } from '../util/index.js';
import { createRefusedWrites, isStoreUnavailable, silentLogger } from '../util/index.js';
import type { EventInput, EventStore } from './event-store.js';

export interface EventRecorderOptions {
  bus: Bus;
  events: EventStore;
  logger?: Logger;
  /**
   * Event types not worth keeping. Entries ending in `:*` match a subsystem. Default: streaming deltas,
   * which are many per run and fully represented by `run:finished`, and a decision loop's decisions, which
   * are what `agent:moved` and `agent:spoke` record, or nothing (a wait): a third of an idle server's rows.
   */
  exclude?: ReadonlyArray<string>;
  /**
   * How long events gather before they are written in one transaction (default 0: what one synchronous
   * stretch of code published). Each transaction is a commit; a chat turn publishes its events across many
   * event-loop turns, so a few milliseconds here make one commit of what would be several. The audit log is
   * not what acknowledges a message: nothing waits for these writes but `flush` and `stop`.
   */
  batchDelayMs?: number;
  /**
   * First wait before writing again events the database refused for now (a full disk, a lost connection);
   * doubles up to `maxWriteRetryMs`. Default 500 ms and 15 s.
   */
  writeRetryMs?: number;
  maxWriteRetryMs?: number;
}

export interface EventRecorder {
  /** Resolves when everything published so far is written, or kept because the database refused it for now. */
  flush(): Promise<void>;
  /** Unsubscribes and writes what is buffered. */
  stop(): Promise<void>;
}

export const defaultUnrecordedEventTypes: ReadonlyArray<string> = ['run:text-delta', 'agent:decided'];

/**
 * Writes bus events to the audit log. Bus delivery is synchronous and writes are not, so events are
 * buffered and written in batches, one batch at a time, which keeps the log in publish order. A batch the
 * database refuses for now (a full disk, a lost connection) is kept (the newest 100,000 events) and written
 * ahead of the next batch, or by a retry timer: whoever fills the disk must not also empty the audit log of
 * what happened meanwhile.
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

  const refused = createRefusedWrites<EventInput>({
    retry: () => void write(),
    firstRetryMs: options.writeRetryMs ?? 500,
    maxRetryMs: options.maxWriteRetryMs ?? 15_000,
    maxKept: 100_000,
    logger,
    what: 'audit events',
  });

  const write = (): Promise<void> => {
    scheduled = false;
    if (timer) {
      clearTimeout(timer);
      timer = undefined;
    }
    const batch = buffer;
    buffer = [];
    if (batch.length === 0 && refused.kept === 0) return writing;
    writing = writing.then(async () => {
      // Taken here, not when the step was queued: a batch refused just before is still ahead of this one.
      const events = refused.withKept(batch);
      if (events.length === 0) return;
      try {
        await options.events.appendMany(events);
        refused.written();
      } catch (error) {
        // Publishing an error event here could feed back into the recorder; the log is the outlet.
        if (isStoreUnavailable(error)) refused.refuse(events, error);
        else logger.error({ err: error, lost: events.length }, 'could not write events to the audit log');
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
      // One last try for what the database refused; what it still refuses is lost, and said so.
      refused.stop();
      await write();
      refused.giveUp();
    },
  };
}
