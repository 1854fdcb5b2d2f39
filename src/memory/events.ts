import type { MemoryEventPayload } from './types.js';

// Merged into the module that declares BusEventMap: augmenting the re-export in bus/index.ts does not merge.
declare module '../bus/events.js' {
  interface BusEventMap {
    /** RAM/LTM maintenance happened: summarize, evict, snapshot, archive, restore. */
    'memory:event': MemoryEventPayload;
    /** Writes to the database failed; memory continues in RAM and retries until the database is back. */
    'memory:degraded': { reason: string; code: string };
    /** The database takes writes again and everything queued while it did not was written through. */
    'memory:recovered': { writtenThrough: number; degradedForMs: number };
  }
}

/** The Spiderweb wire message for a memory event (the original shape, plus additive detail fields). */
export function toSpiderwebMemoryEvent(payload: MemoryEventPayload, request: string | null) {
  const wire: Record<MemoryEventPayload['kind'], { event: string; status: string }> = {
    summarized: { event: 'summarize', status: 'summarized' },
    snapshot: { event: 'summarize', status: 'snapshot' },
    evicted: { event: 'evict', status: 'evicted' },
    archived: { event: 'archive', status: 'archived' },
    restored: { event: 'restore', status: 'restored' },
  };
  return {
    type: 'memory.event' as const,
    request,
    sessionKey: payload.sessionKey,
    ...wire[payload.kind],
    count: payload.count,
    message: payload.message,
    tokensBefore: payload.tokensBefore,
    tokensAfter: payload.tokensAfter,
    memoryIds: payload.memoryIds,
  };
}
