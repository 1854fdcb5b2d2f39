import type { Clock } from '../util/index.js';

export type DedupeEntry =
  | { state: 'in_flight'; runId: string; createdAt: number }
  | { state: 'done'; runId: string; createdAt: number; doneAt: number; result: Record<string, unknown> };

export interface DedupeCache {
  get(key: string): DedupeEntry | undefined;
  begin(key: string, runId: string): void;
  finish(key: string, result: Record<string, unknown>): void;
  forget(key: string): void;
  readonly size: number;
}

/**
 * Remembers idempotency keys of side-effecting requests: in-flight keys until their run ends, finished keys
 * for `ttlMs` so a client that retries after a reconnect gets the cached outcome instead of a second run.
 * Finished entries are evicted oldest first past `maxEntries`; in-flight ones never are (they are bounded
 * by the number of live runs).
 */
export function createDedupeCache(options: { ttlMs: number; maxEntries: number; clock: Clock }): DedupeCache {
  const entries = new Map<string, DedupeEntry>();
  let doneCount = 0;

  const prune = () => {
    const now = options.clock.now();
    for (const [key, entry] of entries) {
      if (entry.state !== 'done') continue;
      if (now - entry.doneAt < options.ttlMs && doneCount <= options.maxEntries) break;
      entries.delete(key);
      doneCount--;
    }
  };

  return {
    get(key) {
      const entry = entries.get(key);
      if (entry?.state === 'done' && options.clock.now() - entry.doneAt >= options.ttlMs) {
        entries.delete(key);
        doneCount--;
        return undefined;
      }
      return entry;
    },
    begin(key, runId) {
      const previous = entries.get(key);
      if (previous?.state === 'done') doneCount--;
      entries.delete(key);
      entries.set(key, { state: 'in_flight', runId, createdAt: options.clock.now() });
    },
    finish(key, result) {
      const previous = entries.get(key);
      if (!previous) return;
      if (previous.state === 'done') doneCount--;
      // Re-insert so that map order is completion order, which is what pruning walks.
      entries.delete(key);
      entries.set(key, {
        state: 'done',
        runId: previous.runId,
        createdAt: previous.createdAt,
        doneAt: options.clock.now(),
        result,
      });
      doneCount++;
      prune();
    },
    forget(key) {
      const previous = entries.get(key);
      if (previous?.state === 'done') doneCount--;
      entries.delete(key);
    },
    get size() {
      return entries.size;
    },
  };
}
