import { afterEach, describe, expect, it } from 'vitest';
import { createSqliteDatabase, migrate, type SqlDatabase, type SqlValue } from '../../src/store/index.js';
import { createWorkQueue } from '../../src/work/index.js';

describe('work queue: the recently resolved items', () => {
  let db: SqlDatabase | undefined;
  afterEach(async () => {
    await db?.close();
  });

  it('reads them from an index in order, not every completed item and a sort', async () => {
    db = createSqliteDatabase({ path: ':memory:' });
    await migrate(db);
    const statements: Array<{ sql: string; params: SqlValue[] }> = [];
    const watched: SqlDatabase = {
      ...db,
      all: (sql, params) => {
        statements.push({ sql, params: [...(params ?? [])] });
        return db!.all(sql, params);
      },
    };
    const queue = createWorkQueue({ db: watched });
    await queue.list({
      states: ['completed'],
      excludeKinds: ['memory.maintain'],
      resolvedSince: 1_000,
      limit: 6,
      order: 'recently-resolved',
    });
    const listed = statements.find((statement) => statement.sql.includes('resolved_at DESC'))!;
    const plan = await db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${listed.sql}`, listed.params);
    const details = plan.map((row) => row.detail).join('\n');
    expect(details).toContain('work_items_state_resolved');
    expect(details).not.toContain('TEMP B-TREE');
  });
});
