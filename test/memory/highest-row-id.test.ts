import { describe, expect, it, vi } from 'vitest';
import { createSqliteDatabase, type SqlDatabase } from '../../src/store/index.js';
import { describeEachDatabase, useMigratedSqliteFile } from '../helpers/databases.js';
import { createHarness, hangars, sessionRef } from './memory-fixtures.js';

const { config, ask, turns } = hangars;

const isHighestRead = (sql: string) => sql.startsWith('SELECT max(id) AS id FROM memory_entries');

/** The recall's block, its first listed address, and how often it read the highest row id. */
async function recall(db: SqlDatabase, memory: ReturnType<typeof createHarness>['memory']) {
  const reads = vi.spyOn(db, 'get');
  try {
    const block = await memory.recallForPrompt(ask);
    return {
      newest: /^- \[([^,]+),/m.exec(block)?.[1],
      highestReads: reads.mock.calls.filter(([sql]) => isHighestRead(sql)).length,
    };
  } finally {
    reads.mockRestore();
  }
}

/**
 * A recall under a row budget plans with the table's highest row id. The store's own inserts raise it as
 * they are made, without a read (a chat turn inserts on each of its commits); rows another connection
 * inserts are seen once the last read is a second old.
 */
describeEachDatabase('the highest entry row id of budgeted recall', (getDb) => {
  it("is not read again after the store's own inserts", async () => {
    const db = getDb();
    const { memory } = createHarness(db, { config });
    await memory.appendBatch(sessionRef('gone'), turns('gone', 1, 30));
    await memory.appendBatch(sessionRef('main'), turns('main', 1, 30));
    expect((await recall(db, memory)).highestReads).toBe(1);
    for (let turn = 31; turn < 37; turn += 2) {
      await memory.appendBatch(sessionRef('main'), turns('main', turn, 2));
      expect((await recall(db, memory)).highestReads).toBe(0);
    }
  });
});

describe('the highest entry row id of budgeted recall, another connection (SQLite)', () => {
  const file = useMigratedSqliteFile('agentd-highest-row-id-');

  it("counts the store's own inserts without reading, and another connection's after a second", async () => {
    const { memory } = createHarness(file.db(), { config });
    await memory.appendBatch(sessionRef('gone'), turns('gone', 1, 30));
    await memory.appendBatch(sessionRef('main'), turns('main', 1, 30));
    expect(await recall(file.db(), memory)).toEqual({ newest: 'agent:alpha:gone#30', highestReads: 1 });

    // Past the kept lookup only because the insert raised the highest row id: no read told it.
    await memory.append(sessionRef('gone'), { role: 'user', content: 'gone hangar 31' });
    await memory.appendBatch(sessionRef('main'), turns('main', 31, 2));
    expect(await recall(file.db(), memory)).toEqual({ newest: 'agent:alpha:gone#31', highestReads: 0 });

    const other = createSqliteDatabase({ path: file.path() });
    try {
      const { memory: elsewhere } = createHarness(other, { config });
      await elsewhere.append(sessionRef('far'), { role: 'user', content: 'far hangar 1' });
      await elsewhere.recallForPrompt(ask); // indexes its row, as its own next read would
    } finally {
      await other.close();
    }
    // Another connection's commit drops the kept lookup: the row is found, the last read still trusted.
    expect(await recall(file.db(), memory)).toEqual({ newest: 'agent:alpha:far#1', highestReads: 0 });
    await new Promise((resolve) => setTimeout(resolve, 1_050));
    expect(await recall(file.db(), memory)).toEqual({ newest: 'agent:alpha:far#1', highestReads: 1 });
  });
});
