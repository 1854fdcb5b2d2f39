import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { migrate, type SqlDatabase } from '../../src/store/index.js';
import { createSqlRecordStore } from '../../src/workflow/record-store.js';
import { migrateBefore, openTestDatabase } from '../helpers/databases.js';
import { insertRows, type StoredRow } from '../helpers/workflow-rows.js';

// Migration 0018 rebuilds the keys of workflow_stages and workflow_events and drops two artifact indexes:
// rows stored before it must read back the same after.
const versionOneRows = JSON.parse(
  readFileSync(join(import.meta.dirname, '..', 'fixtures', 'workflow-records', 'v1-rows.json'), 'utf8'),
) as Record<string, StoredRow[]>;

const opened: SqlDatabase[] = [];
afterEach(async () => {
  for (const db of opened.splice(0)) await db.close();
});

for (const dialect of ['sqlite', 'postgres'] as const) {
  describe(`migration 0018 [${dialect}]`, () => {
    it('keeps the stage rows written before it, which read back as they did', async () => {
      // Read by this build, the rows need its later columns: they are read as stored in the tables of every
      // migration, and from a database that had them before 0018.
      const current = await openTestDatabase(dialect);
      opened.push(current);
      await insertRows(current, versionOneRows);
      const before = await createSqlRecordStore(current).loadRun('wft_fixture_branch');
      expect(before!.tasks.flatMap((task) => task.history)).toHaveLength(7);
      const db = await openTestDatabase(dialect, { migrate: false });
      opened.push(db);
      await migrateBefore(db, 18);
      await insertRows(db, versionOneRows);
      expect((await migrate(db)).applied).toContain(18);
      const store = createSqlRecordStore(db);
      expect(await store.loadRun('wft_fixture_branch')).toEqual(before);
      expect(await store.loadRun('wft_fixture_halt')).toMatchObject({
        tasks: [{ state: 'completed', currentStageId: 'stop' }],
      });
      expect(before!.events.length).toBe(
        versionOneRows.workflow_events!.filter((row) => row.root_task_id === 'wft_fixture_branch').length,
      );
      // Still one row per task and index.
      const [first] = versionOneRows.workflow_stages!;
      const columns = Object.keys(first!);
      await expect(
        db.run(
          `INSERT INTO workflow_stages (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`,
          columns.map((column) => first![column] ?? null),
        ),
      ).rejects.toThrow();
    });
  });
}
