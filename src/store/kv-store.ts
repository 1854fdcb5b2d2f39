import type { Clock } from '../util/index.js';
import { systemClock } from '../util/index.js';
import type { SqlDatabase, SqlExecutor } from './database.js';

export interface KvEntry {
  key: string;
  value: string;
  updatedAt: number;
}

/** Small named values (tokens' metadata, cursors, flags), grouped by namespace. Values are strings; JSON is the caller's. */
export interface KvStore {
  get(namespace: string, key: string): Promise<string | undefined>;
  /** With `tx`, in that transaction (one opened on this store's database). */
  set(namespace: string, key: string, value: string, tx?: SqlExecutor): Promise<void>;
  /** True when the key existed. With `tx`, in that transaction. */
  delete(namespace: string, key: string, tx?: SqlExecutor): Promise<boolean>;
  /** Every entry of the namespace, by key. */
  list(namespace: string): Promise<KvEntry[]>;
}

export function createKvStore(db: SqlDatabase, options: { clock?: Clock } = {}): KvStore {
  const clock = options.clock ?? systemClock;
  // Byte order on both dialects; Postgres would otherwise sort by the database's locale.
  const byKey = db.dialect === 'postgres' ? 'key COLLATE "C"' : 'key';
  return {
    async get(namespace, key) {
      const row = await db.get<{ value: string }>('SELECT value FROM kv WHERE namespace = ? AND key = ?', [
        namespace,
        key,
      ]);
      return row?.value;
    },
    async set(namespace, key, value, tx) {
      await (tx ?? db).run(
        `INSERT INTO kv (namespace, key, value, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
        [namespace, key, value, clock.now()],
      );
    },
    async delete(namespace, key, tx) {
      const result = await (tx ?? db).run('DELETE FROM kv WHERE namespace = ? AND key = ?', [namespace, key]);
      return result.changes > 0;
    },
    async list(namespace) {
      const rows = await db.all<{ key: string; value: string; updated_at: number }>(
        `SELECT key, value, updated_at FROM kv WHERE namespace = ? ORDER BY ${byKey}`,
        [namespace],
      );
      return rows.map((row) => ({ key: row.key, value: row.value, updatedAt: Number(row.updated_at) }));
    },
  };
}
