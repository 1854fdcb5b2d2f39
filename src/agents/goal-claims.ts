import type { SqlDatabase } from '../store/index.js';
import {
  type Clock,
  createHeldRenewal,
  createIdGenerator,
  type IdGenerator,
  type Logger,
  silentLogger,
  systemClock,
} from '../util/index.js';

/**
 * Which process plans a keyed goal, across the processes of one database (migration 0043). The planner's
 * in-memory wait covers the requests of one process; a retry that reaches another process while the first
 * still plans is held here instead of planning the goal a second time.
 */
export interface GoalClaims {
  /**
   * Claims the session's key for planning `goal`: `claimed` when no live claim holds it (none, or one whose
   * holder's lease lapsed: it died), else the goal the live claim is planning.
   */
  claim(
    sessionKey: string,
    key: string,
    goal: string,
  ): Promise<{ claimed: true } | { claimed: false; goal: string }>;
  /** Ends this process's claim (its answer is written, or its planning failed). */
  release(sessionKey: string, key: string): Promise<void>;
  /** Stops renewing this process's claims (they lapse after a lease unless released first). */
  close(): Promise<void>;
}

export interface SqlGoalClaimsOptions {
  db: SqlDatabase;
  /** How long a claim holds after its last renewal (default 30 s); renewed every third of it while held. */
  leaseMs?: number;
  clock?: Clock;
  idGenerator?: IdGenerator;
  logger?: Logger;
}

const hourMs = 60 * 60 * 1000;

export function createSqlGoalClaims(options: SqlGoalClaimsOptions): GoalClaims {
  const { db } = options;
  const leaseMs = options.leaseMs ?? 30_000;
  const clock = options.clock ?? systemClock;
  const logger = (options.logger ?? silentLogger).child({ component: 'planner' });
  const ownerId = (options.idGenerator ?? createIdGenerator())('gco_');
  let lastSweepAt = Number.NEGATIVE_INFINITY;
  const renewal = createHeldRenewal({
    intervalMs: leaseMs / 3,
    renew: async () => {
      try {
        await db.run('UPDATE goal_claims SET held_until = ? WHERE owner_id = ?', [
          clock.now() + leaseMs,
          ownerId,
        ]);
      } catch (error) {
        logger.warn({ err: error }, 'could not renew the claims of the goals being planned');
      }
    },
  });

  return {
    async claim(sessionKey, key, goal) {
      const now = clock.now();
      // Claims whose holder died and whose key nobody sent again: deleted now and then, so none stays for ever.
      if (now - lastSweepAt >= hourMs) {
        lastSweepAt = now;
        await db.run('DELETE FROM goal_claims WHERE held_until < ?', [now - leaseMs]);
      }
      const taken = await db.get<{ owner_id: string }>(
        `INSERT INTO goal_claims (session_key, idempotency_key, goal, owner_id, held_until) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (session_key, idempotency_key) DO UPDATE SET goal = excluded.goal, owner_id = excluded.owner_id,
           held_until = excluded.held_until WHERE goal_claims.held_until < ?
         RETURNING owner_id`,
        [sessionKey, key, goal, ownerId, now + leaseMs, now],
      );
      if (taken) {
        renewal.hold();
        return { claimed: true };
      }
      const holder = await db.get<{ goal: string }>(
        'SELECT goal FROM goal_claims WHERE session_key = ? AND idempotency_key = ?',
        [sessionKey, key],
      );
      // Released between the two statements: the caller claims again.
      return holder ? { claimed: false, goal: holder.goal } : { claimed: false, goal };
    },
    async release(sessionKey, key) {
      renewal.release();
      await db.run('DELETE FROM goal_claims WHERE session_key = ? AND idempotency_key = ? AND owner_id = ?', [
        sessionKey,
        key,
        ownerId,
      ]);
    },
    close: () => renewal.stop(),
  };
}
