import { createHeldRenewal, type Logger, silentLogger } from '../util/index.js';
import type { SqlDatabase } from './database.js';

/**
 * The lease of a process that serves chat on a database shared with other hosts (migration 0050). Its runs'
 * marks and its waiting messages name it (`openOwner`); another host's process cannot see whether it lives,
 * so it renews its lease while it is open, and the others leave its runs to it while the lease holds.
 */
export interface ChatOwnerLease {
  /** The owners whose lease holds now (this one's too). */
  live(): Promise<ReadonlySet<string>>;
  /** The owners whose lease lapsed: their process stopped without giving it up (a crash, a lost host). */
  lapsed(): Promise<string[]>;
  /** Drops the leases of `owners`, once their runs and messages were taken. */
  forget(owners: ReadonlyArray<string>): Promise<void>;
  /** Stops renewing and gives the lease up. */
  close(): Promise<void>;
}

export interface ChatOwnerLeaseOptions {
  db: SqlDatabase;
  ownerId: string;
  /** How long the lease holds after a renewal (`chat.ownerLeaseMs`); renewed every third of it. */
  leaseMs: number;
  logger?: Logger;
}

/** The database's own time in epoch ms: leases are written and compared by one clock, whatever the hosts'. */
const databaseNowMs = {
  sqlite: "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
  postgres: '(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint',
} as const;

/** Writes the lease (the first renewal) and keeps renewing it until `close`. */
export async function createChatOwnerLease(options: ChatOwnerLeaseOptions): Promise<ChatOwnerLease> {
  const { db, ownerId } = options;
  const leaseMs = Math.max(1, Math.floor(options.leaseMs));
  const logger = options.logger ?? silentLogger;
  const now = databaseNowMs[db.dialect];
  const renewSql = `INSERT INTO chat_owners (owner_id, alive_until) VALUES (?, ${now} + ?)
    ON CONFLICT (owner_id) DO UPDATE SET alive_until = excluded.alive_until`;
  const renew = () => db.run(renewSql, [ownerId, leaseMs]);
  await renew();
  const renewal = createHeldRenewal({
    intervalMs: leaseMs / 3,
    renew: async () => {
      try {
        await renew();
      } catch (error) {
        // Tried again at the next third; the lease lapses only after three refusals in a row.
        logger.warn({ err: error, ownerId }, 'could not renew the chat lease');
      }
    },
  });
  renewal.hold();
  const owners = async (lapsed: boolean) =>
    (
      await db.all<{ owner_id: string }>(
        `SELECT owner_id FROM chat_owners WHERE alive_until ${lapsed ? '<' : '>='} ${now}`,
      )
    ).map((row) => row.owner_id);
  return {
    live: async () => new Set(await owners(false)),
    lapsed: () => owners(true),
    async forget(lapsed) {
      for (const owner of lapsed)
        await db.run(`DELETE FROM chat_owners WHERE owner_id = ? AND alive_until < ${now}`, [owner]);
    },
    async close() {
      renewal.release();
      await renewal.stop();
      await db.run('DELETE FROM chat_owners WHERE owner_id = ?', [ownerId]).catch((error: unknown) => {
        logger.warn({ err: error, ownerId }, 'could not give up the chat lease');
      });
    },
  };
}
