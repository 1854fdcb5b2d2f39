import type { SessionRef } from '../memory/index.js';
import type { Clock, Logger } from '../util/index.js';

export interface AutoRecallOptions {
  /** One search: the block for the prompt (empty when nothing relevant was found). */
  search: (ref: SessionRef, query: string) => Promise<string>;
  clock: Clock;
  logger: Logger;
  /**
   * How long a session's last recall is used as it is (0: every turn searches, the rest of these options
   * do not apply). A search ranks up to `memory.recall.promptMaxScoredRows` stored entries: about 0.12 ms of
   * CPU at 100,000 entries alone and 0.2–0.35 ms among other searches, on a loaded machine
   * (bench/results/recall.md, docs/memory.md), more than the rest of a turn's bookkeeping.
   */
  refreshMs: number;
  /**
   * The share of time searches for stale sessions may take while other turns wait for the event loop. Past
   * it, a turn whose session has a recall already uses that one and the search runs later in the
   * background, one at a time, paced to this share.
   */
  maxShare: number;
}

/** Sessions whose last recall is remembered; the least recently recalled are forgotten first. */
const maxSessions = 10_000;

export interface AutoRecall {
  /** The recalled-memory block for the prompt of a turn of `ref` whose message is `query`. */
  block(ref: SessionRef, query: string): Promise<string>;
  /**
   * Drops what is kept for a session instance that has ended (reset or archived): its id gets no more
   * turns, and its block would otherwise stay until `maxSessions` newer sessions push it out.
   */
  forget(sessionId: string): void;
  /** Stops background searches. */
  close(): void;
}

interface Recent {
  block: string;
  atMs: number;
}

/**
 * Automatic recall for chat turns. A session's first turn always searches. Later turns reuse the session's
 * last block while it is younger than `refreshMs`; after that they search again, unless searches already
 * took their share of time, in which case the turn keeps the older block (it only names entries outside the
 * session's context, and the context only gains entries, so it stays true) and the search is queued.
 */
export function createAutoRecall(options: AutoRecallOptions): AutoRecall {
  const { clock, logger, refreshMs } = options;
  const recent = new Map<string, Recent>();
  /** Sessions waiting for a background search, with the latest message of each. */
  const queued = new Map<string, { ref: SessionRef; query: string }>();
  /** Searches may run again from this time on without going over `maxShare`. */
  let freeAtMs = 0;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const remember = (sessionId: string, block: string, atMs: number) => {
    recent.delete(sessionId);
    recent.set(sessionId, { block, atMs });
    if (recent.size > maxSessions) recent.delete(recent.keys().next().value as string);
  };

  const search = async (ref: SessionRef, query: string): Promise<string | undefined> => {
    const started = clock.now();
    try {
      return await options.search(ref, query);
    } catch (error) {
      logger.warn(
        { err: error, sessionKey: ref.sessionKey },
        'automatic recall failed; the turn continues without it',
      );
      return undefined;
    } finally {
      const ended = clock.now();
      freeAtMs = Math.max(freeAtMs, ended + ((ended - started) * (1 - options.maxShare)) / options.maxShare);
    }
  };

  const schedule = () => {
    if (timer || closed || queued.size === 0) return;
    timer = setTimeout(
      () => {
        timer = undefined;
        const next = queued.entries().next().value;
        if (!next || closed) return;
        const [sessionId, { ref, query }] = next;
        queued.delete(sessionId);
        void search(ref, query).then((block) => {
          if (block !== undefined) remember(sessionId, block, clock.now());
          schedule();
        });
      },
      Math.max(0, freeAtMs - clock.now()),
    );
    timer.unref();
  };

  return {
    async block(ref, query) {
      if (refreshMs <= 0) return (await search(ref, query)) ?? '';
      const now = clock.now();
      const last = recent.get(ref.sessionId);
      if (last && now - last.atMs < refreshMs) return last.block;
      if (!last || now >= freeAtMs) {
        queued.delete(ref.sessionId);
        const block = await search(ref, query);
        if (block === undefined) return last?.block ?? '';
        remember(ref.sessionId, block, clock.now());
        return block;
      }
      queued.set(ref.sessionId, { ref, query });
      schedule();
      return last.block;
    },
    forget(sessionId) {
      recent.delete(sessionId);
      queued.delete(sessionId);
    },
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      queued.clear();
    },
  };
}
