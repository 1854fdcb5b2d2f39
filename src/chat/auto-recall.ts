import type { SessionRef } from '../memory/index.js';
import type { Clock, Logger } from '../util/index.js';

export interface AutoRecallOptions {
  /** One search: the block for the prompt (empty when nothing relevant was found). */
  search: (ref: SessionRef, query: string) => Promise<string>;
  clock: Clock;
  logger: Logger;
  /**
   * How long a session's last block serves a later turn whose message is the same text (a message sent
   * again), and whether searches are paced at all (0: every turn searches, and `maxShare` does not apply).
   * A search ranks up to `memory.recall.promptMaxScoredRows` stored entries: about 0.1 ms of CPU at 100,000
   * entries alone and several times that inside a served turn (bench/results/recall-in-turn.md), more than
   * the rest of a turn's bookkeeping.
   */
  refreshMs: number;
  /**
   * The share of time searches may take while other turns wait for the event loop, on average over time,
   * with a burst of `maxShare` of 200 ms allowed: a server's first searches (2.4–2.5 ms cold, then about
   * 0.5) and a few quick messages. Past it, a turn whose session has a block keeps that one instead of
   * searching.
   */
  maxShare: number;
}

/** Searches may take `maxShare` of this much time in one burst before the average share applies. */
const burstWindowMs = 200;

/** Sessions whose last recall is remembered; the least recently recalled are forgotten first. */
const maxSessions = 10_000;
/**
 * Longer messages are not kept to be compared (they are not reused): 10,000 sessions' last messages could
 * otherwise hold a gigabyte of pasted text after their contexts were unloaded.
 */
const maxKeptQueryChars = 1_024;

export interface AutoRecall {
  /** The recalled-memory block for the prompt of a turn of `ref` whose message is `query`. */
  block(ref: SessionRef, query: string): Promise<string>;
  /**
   * Drops what is kept for a session instance that has ended (reset or archived): its id gets no more
   * turns, and its block would otherwise stay until `maxSessions` newer sessions push it out.
   */
  forget(sessionId: string): void;
}

interface Recent {
  block: string;
  /** The message the block was searched for, unless it was longer than `maxKeptQueryChars`. */
  query: string | undefined;
  atMs: number;
}

/**
 * Automatic recall for chat turns. A turn searches for its own message: a block made for another message
 * names what was relevant to that one, and a question sent a second after a greeting would be answered
 * without the memories it asks about. Two exceptions. A message sent again within `refreshMs` gets the
 * block its first sending got. And while searches have taken more than `maxShare` of the time (turns sent
 * faster than anyone types, or many at once), a session that has a block keeps it rather than search: load
 * shedding (the block only names entries outside the session's context, which only gains entries, so it
 * stays true, if less to the point). A session's first turn always searches.
 */
export function createAutoRecall(options: AutoRecallOptions): AutoRecall {
  const { clock, logger, refreshMs } = options;
  const recent = new Map<string, Recent>();
  // Search time that may still be spent (ms): it accrues at `maxShare` of the time passing, up to one
  // burst, and each search spends what it took. Below zero, sessions that have a block keep it.
  const maxCreditMs = options.maxShare * burstWindowMs;
  let creditMs = maxCreditMs;
  let creditAtMs = clock.now();
  const creditAt = (now: number) => {
    creditMs = Math.min(maxCreditMs, creditMs + (now - creditAtMs) * options.maxShare);
    creditAtMs = now;
    return creditMs;
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
      creditMs = creditAt(ended) - (ended - started);
    }
  };

  return {
    async block(ref, query) {
      if (refreshMs <= 0) return (await search(ref, query)) ?? '';
      const last = recent.get(ref.sessionId);
      const now = clock.now();
      if (last && ((last.query === query && now - last.atMs < refreshMs) || creditAt(now) < 0))
        return last.block;
      const block = await search(ref, query);
      if (block === undefined) return last?.block ?? '';
      recent.delete(ref.sessionId);
      recent.set(ref.sessionId, {
        block,
        query: query.length <= maxKeptQueryChars ? query : undefined,
        atMs: clock.now(),
      });
      if (recent.size > maxSessions) recent.delete(recent.keys().next().value as string);
      return block;
    },
    forget(sessionId) {
      recent.delete(sessionId);
    },
  };
}
