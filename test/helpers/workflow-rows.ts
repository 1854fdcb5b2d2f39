import type { SqlDatabase } from '../../src/store/index.js';

export type StoredRow = Record<string, string | number | null>;

/** Inserts rows as a fixture file holds them (`{ table: [row, …] }`), column by column, in file order. */
export async function insertRows(db: SqlDatabase, rows: Record<string, StoredRow[]>): Promise<void> {
  for (const [table, list] of Object.entries(rows)) {
    for (const row of list) {
      const columns = Object.keys(row);
      await db.run(
        `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`,
        columns.map((column) => row[column] ?? null),
      );
    }
  }
}
