import { describe, expect, it } from 'vitest';
import { createLtmStore } from '../../src/memory/ltm-store.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { openTestDatabase } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

// Summaries have an index of their own (a partial one, migration 0024); entries are read by agent and time.
describe('reading memory entries by kind on SQLite', () => {
  it('reads summaries through their partial index and entries through the by-agent one', async () => {
    const db = await openTestDatabase('sqlite');
    try {
      const statements: Array<{ sql: string; params: unknown[] }> = [];
      const recording: SqlDatabase = {
        ...db,
        all: (sql, params) => {
          statements.push({ sql, params: [...(params ?? [])] });
          return db.all(sql, params);
        },
      };
      const ltm = createLtmStore(recording, { sqliteVec: false });
      const { memory } = createHarness(db);
      await memory.append(sessionRef(), { role: 'user', content: 'a plain entry' });
      await db.run(
        'INSERT INTO memory_entries (session_key, memory_id, session_id, agent_id, kind, role, state, order_key, content, tokens, created_at_ms, updated_at_ms) ' +
          "VALUES ('agent:alpha:main', 9, 's-alpha-main', 'alpha', 'summary', 'system', 'active', 1, 'what was said', 5, 2, 2)",
      );
      const plan = async (kind: 'entry' | 'summary') => {
        statements.length = 0;
        const rows = await ltm.listEntries({ agentId: 'alpha', includeArchived: true, kind }, 10);
        const { sql, params } = statements[0]!;
        const detail = (await db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${sql}`, params as never))
          .map((row) => row.detail)
          .join(' | ');
        return { contents: rows.map((row) => row.content), detail };
      };
      expect(await plan('summary')).toEqual({
        contents: ['what was said'],
        detail: expect.stringContaining('memory_entries_by_agent_kind'),
      });
      expect(await plan('entry')).toEqual({
        contents: ['a plain entry'],
        detail: expect.stringContaining('memory_entries_by_agent '),
      });
    } finally {
      await db.close();
    }
  });
});
