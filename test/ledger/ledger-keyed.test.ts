import { afterEach, expect, it } from 'vitest';
import { createLedger } from '../../src/ledger/index.js';
import { migrate, type SqlDatabase } from '../../src/store/index.js';
import { createManualClock } from '../../src/util/index.js';
import { describeEachDatabase, openTestDatabase } from '../helpers/databases.js';
import { migrationsUpTo } from '../helpers/migrations.js';

describeEachDatabase('the ledger keyed by its readers (migration 0025)', (getDb) => {
  const opened: SqlDatabase[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((db) => db.close()));
  });

  it("keeps an older database's entries, appends after them, and lists findings from the findings' index", async () => {
    const db = await openTestDatabase(getDb().dialect, { migrate: false });
    opened.push(db);
    await migrate(db, { dir: migrationsUpTo(24) });
    const insert =
      'INSERT INTO work_ledger (work_item_id, seq, entry_type, content, created_at) VALUES (?, ?, ?, ?, ?)';
    await db.run(insert, ['w', 1, 'plan', 'read the code', 100]);
    await db.run(insert, ['w', 2, 'finding', 'uses sqlite', 200]);
    await db.run(insert, ['v', 1, 'finding', 'has tests', 300]);
    if (db.dialect === 'postgres')
      await db.run('INSERT INTO work_ledger_heads (work_item_id, last_seq) VALUES (?, ?), (?, ?)', [
        'w',
        2,
        'v',
        1,
      ]);

    expect((await migrate(db)).applied).toContain(25);

    const ledger = createLedger({ db, clock: createManualClock(400) });
    expect(await ledger.append('w', { entryType: 'note', content: 'after the migration' })).toMatchObject({
      seq: 3,
    });
    expect((await ledger.read('w')).map((entry) => [entry.seq, entry.entryType, entry.content])).toEqual([
      [1, 'plan', 'read the code'],
      [2, 'finding', 'uses sqlite'],
      [3, 'note', 'after the migration'],
    ]);
    expect(
      (await ledger.listRecentFindings({ sinceMs: 150, limit: 10 })).map((entry) => entry.content),
    ).toEqual(['has tests', 'uses sqlite']);
    await expect(db.run("UPDATE work_ledger SET content = 'changed'")).rejects.toThrow(/append-only/);
    await expect(db.run('DELETE FROM work_ledger')).rejects.toThrow(/append-only/);

    const recentFindings =
      "SELECT work_item_id, seq FROM work_ledger WHERE entry_type = 'finding' AND created_at >= 150 ORDER BY created_at DESC";
    if (db.dialect === 'sqlite') {
      // One B-tree for the rows: no rowid table beside the key.
      expect(
        await db.all("SELECT name FROM sqlite_master WHERE tbl_name = 'work_ledger' AND type = 'index'"),
      ).toEqual([{ name: 'work_ledger_findings_by_time' }]);
      const plan = await db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${recentFindings}`);
      expect(plan.map((step) => step.detail).join('\n')).toContain('work_ledger_findings_by_time');
    } else {
      expect(
        await db.all(
          "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'work_ledger' ORDER BY indexname",
        ),
      ).toEqual([{ indexname: 'work_ledger_findings_by_time' }, { indexname: 'work_ledger_pkey' }]);
    }
  });
});
