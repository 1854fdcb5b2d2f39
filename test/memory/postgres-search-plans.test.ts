import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLtmStore } from '../../src/memory/ltm-store.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { openTestDatabase, postgresTestBackend } from '../helpers/databases.js';
import { recordingReads } from '../helpers/query-plans.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

const backend = await postgresTestBackend();

// A chat-speed table that autovacuum has not visited yet: no statistics, and with GIN's default pending
// list (4 MB) new entries sit in a list each search reads in full, which the planner prices above a
// sequential scan (migration 0029 bounds the list at 128 kB).
describe.skipIf(backend.kind !== 'server')('full-text plans on Postgres before autovacuum has run', () => {
  let db: SqlDatabase;
  beforeEach(async () => {
    db = await openTestDatabase('postgres');
  });
  afterEach(async () => {
    await db.close();
  });

  /** 6,000 turns that all say "turn", each with a number of its own. */
  const write = async () => {
    const { memory } = createHarness(db, { config: { maxActiveEntries: 64 } });
    for (let batch = 0; batch < 12; batch++)
      await memory.appendBatch(
        sessionRef(`s${batch}`),
        Array.from({ length: 500 }, (_, index) => ({
          role: index % 2 ? ('assistant' as const) : ('user' as const),
          content: `turn ${batch * 500 + index}`,
        })),
      );
    return memory;
  };
  const planOf = async (sql: string, params: unknown[]) => {
    const rows = await db.all<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${sql}`, params as never);
    return JSON.stringify(rows[0]!['QUERY PLAN']);
  };
  const countSql =
    "SELECT count(*) AS n FROM (SELECT 1 FROM memory_entries e WHERE (e.search_vector || e.context_before) @@ to_tsquery('english', ?) LIMIT ?) m";

  it('counts a rare term through the GIN index, not by reading every row', async () => {
    const memory = await write();
    const plan = await planOf(countSql, ['4321', 201]);
    expect(plan).toContain('memory_entries_context_search');
    expect(plan).not.toContain('Seq Scan');
    // And the search it serves still finds the turn.
    const hits = await memory.search({ agentId: 'alpha', query: 'turn 4321', limit: 3, maxScoredRows: 200 });
    expect(hits[0]?.content).toBe('turn 4321');
  });

  it('bounds the pending list of both GIN indexes of memory entries', async () => {
    await write();
    const rows = await db.all<{ relname: string; reloptions: string[] | null }>(
      "SELECT relname, reloptions FROM pg_class WHERE relname IN ('memory_entries_search', 'memory_entries_context_search') AND relnamespace = current_schema()::regnamespace ORDER BY relname",
    );
    expect(rows).toEqual([
      { relname: 'memory_entries_context_search', reloptions: ['gin_pending_list_limit=128'] },
      { relname: 'memory_entries_search', reloptions: ['gin_pending_list_limit=128'] },
    ]);
  });

  // Migration 0032: no index of the instance's own; its range of the key's MemoryIDs instead.
  it("loads a session instance through the key's range of MemoryIDs", async () => {
    await write();
    const recording = recordingReads(db);
    const ltm = createLtmStore(recording.db, { sqliteVec: false });
    const ref = sessionRef('s7');
    const row = await ltm.getSession(ref.sessionId);
    expect(row?.ids?.firstId).toBe(1);
    const loaded = await ltm.loadRam(ref, row!.ids, 256);
    expect(loaded.filter((entry) => entry.state === 'active')).toHaveLength(56);
    const reads = recording.statements.filter(({ sql }) => sql.includes('memory_entries e'));
    expect(reads).toHaveLength(2);
    for (const { sql, params } of reads) {
      const plan = await planOf(sql, params);
      expect(plan).toContain('memory_entries_session_key_memory_id_key');
      expect(plan).not.toContain('Seq Scan');
    }
  });
});
