import { describe, expect, it } from 'vitest';
import { createWorkQueue, type WorkListFilter } from '../../src/work/index.js';
import { openTestDatabase } from '../helpers/databases.js';
import { queryPlan, recordingReads } from '../helpers/query-plans.js';

// The dashboard's Work view lists the newest items every 2 s. Read through the index by creation (migration
// 0031), a list stops at its limit; without it, every item was read and sorted (55 ms at 100,000 items). SQLite
// keeps no statistics here, so a list of states that only grow (the terminal ones) must not take the state index.
describe('listing work items on SQLite', () => {
  it('reads the newest items by creation unless the states asked for are the small live ones', async () => {
    const db = await openTestDatabase('sqlite');
    try {
      const recording = recordingReads(db);
      const { statements } = recording;
      const queue = createWorkQueue({ db: recording.db });
      const first = await queue.submit({ kind: 'task', description: 'first', agentId: 'main' });
      const second = await queue.submit({ kind: 'task', description: 'second', agentId: 'main' });
      await queue.cancel(first.id, { reason: 'not needed' });

      const planOf = async (filter: WorkListFilter) => {
        statements.length = 0;
        const items = await queue.list(filter);
        const statement = statements.find(({ sql }) => sql.startsWith('SELECT * FROM work_items'));
        if (!statement) throw new Error('the list read no work item');
        return { ids: items.map((item) => item.id), plan: await queryPlan(db, statement) };
      };

      const byCreation = expect.stringContaining('work_items_by_created');
      expect(await planOf({})).toEqual({ ids: [second.id, first.id], plan: byCreation });
      expect(await planOf({ excludeKinds: ['memory.maintain'] })).toEqual({
        ids: [second.id, first.id],
        plan: byCreation,
      });
      expect(await planOf({ agentId: 'main', order: 'oldest' })).toEqual({
        ids: [first.id, second.id],
        plan: byCreation,
      });
      expect(await planOf({ states: ['cancelled', 'completed'] })).toEqual({
        ids: [first.id],
        plan: byCreation,
      });
      expect(await planOf({ states: ['queued'] })).toEqual({
        ids: [second.id],
        plan: expect.stringContaining('work_items_state_updated (state=?)'),
      });
    } finally {
      await db.close();
    }
  });
  it('reads the recently resolved items from an index in order, not every completed item and a sort', async () => {
    const db = await openTestDatabase('sqlite');
    try {
      const recording = recordingReads(db);
      await createWorkQueue({ db: recording.db }).list({
        states: ['completed'],
        excludeKinds: ['memory.maintain'],
        resolvedSince: 1_000,
        limit: 6,
        order: 'recently-resolved',
      });
      const listed = recording.statements.find((statement) => statement.sql.includes('resolved_at DESC'))!;
      const plan = await queryPlan(db, listed);
      expect(plan).toContain('work_items_state_resolved');
      expect(plan).not.toContain('TEMP B-TREE');
    } finally {
      await db.close();
    }
  });
});
