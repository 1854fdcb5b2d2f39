import type { SqlDatabase } from '../../src/store/index.js';

export interface RecordedStatement {
  sql: string;
  params: unknown[];
}

/**
 * `db` with every `all` call noted (its SQL and parameters) before it runs, for tests that check how SQLite
 * plans the statements a store issues.
 */
export function recordingReads(db: SqlDatabase): { db: SqlDatabase; statements: RecordedStatement[] } {
  const statements: RecordedStatement[] = [];
  return {
    statements,
    db: {
      ...db,
      all: (sql, params) => {
        statements.push({ sql, params: [...(params ?? [])] });
        return db.all(sql, params);
      },
    },
  };
}

/** SQLite's plan of a recorded statement: `EXPLAIN QUERY PLAN`'s steps joined by ` | `. */
export async function queryPlan(db: SqlDatabase, statement: RecordedStatement): Promise<string> {
  const rows = await db.all<{ detail: string }>(
    `EXPLAIN QUERY PLAN ${statement.sql}`,
    statement.params as never,
  );
  return rows.map((row) => row.detail).join(' | ');
}
