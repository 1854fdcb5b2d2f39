import { afterEach, describe, expect, it } from 'vitest';
import { migrate, type SqlDatabase } from '../../src/store/index.js';
import { migrateBefore, openTestDatabase } from '../helpers/databases.js';

// Migration 0044: the tasks a version before agent mailboxes (0037) left assigned or in progress, with their
// message lost at a restart, end failed; a task whose message waits in a mailbox is left to its turn.

let db: SqlDatabase | undefined;
afterEach(async () => {
  await db?.close();
  db = undefined;
});

const insertTask = (status: string, id: string, completedAt: number | null = null) =>
  db!.run(
    'INSERT INTO agent_tasks (id, agent_id, task_name, status, result, created_at, completed_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    [id, 'main', `do ${id}`, status, status === 'completed' ? 'done' : null, 1_000, completedAt],
  );

for (const dialect of ['sqlite', 'postgres'] as const) {
  describe(`migration 0044 [${dialect}]`, () => {
    it('ends the live tasks that have no message as failed, saying why, and leaves the others', async () => {
      db = await openTestDatabase(dialect, { migrate: false });
      await migrateBefore(db, 44);
      await insertTask('assigned', 'lost-assigned');
      await insertTask('in_progress', 'lost-running');
      await insertTask('assigned', 'waiting');
      await insertTask('completed', 'done', 2_000);
      await db.run(
        'INSERT INTO agent_mailbox (agent_id, kind, sender, content, task_id, owner, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        ['main', 'task', 'user', 'do waiting', 'waiting', 'gone-process', 1_000],
      );
      const before = Date.now();
      expect((await migrate(db)).applied).toContain(44);

      const rows = await db.all<{
        id: string;
        status: string;
        result: string | null;
        completed_at: number | null;
      }>('SELECT id, status, result, completed_at FROM agent_tasks ORDER BY id');
      const byId = new Map(rows.map((row) => [row.id, row]));
      for (const id of ['lost-assigned', 'lost-running']) {
        expect(byId.get(id)).toMatchObject({
          status: 'failed',
          result: expect.stringContaining('its message was lost when agentd stopped'),
        });
        // Epoch milliseconds, as the runtime writes them (the second of the migration, rounded down).
        expect(Number(byId.get(id)!.completed_at)).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
        expect(Number(byId.get(id)!.completed_at)).toBeLessThanOrEqual(Date.now());
      }
      expect(byId.get('waiting')).toMatchObject({ status: 'assigned', completed_at: null });
      expect(byId.get('done')).toMatchObject({ status: 'completed', result: 'done' });
    });
  });
}
