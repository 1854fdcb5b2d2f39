import { describe, expect, it } from 'vitest';
import { createLtmStore, type EntryFilter } from '../../src/memory/ltm-store.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { openTestDatabase } from '../helpers/databases.js';
import { queryPlan, type RecordedStatement, recordingReads } from '../helpers/query-plans.js';
import { createHarness, type MemoryHarness, sessionRef } from './memory-fixtures.js';

/** A SQLite store with a memory service (made with `harness`), and a long-term store whose reads are recorded. */
async function withRecordedLtm(
  work: (setup: {
    db: SqlDatabase;
    ltm: ReturnType<typeof createLtmStore>;
    memory: MemoryHarness['memory'];
    statements: RecordedStatement[];
  }) => Promise<void>,
  harness: Parameters<typeof createHarness>[1] = {},
): Promise<void> {
  const db = await openTestDatabase('sqlite');
  try {
    const recording = recordingReads(db);
    const ltm = createLtmStore(recording.db, { sqliteVec: false });
    await work({ db, ltm, memory: createHarness(db, harness).memory, statements: recording.statements });
  } finally {
    await db.close();
  }
}

// Summaries have an index of their own (a partial one, migration 0024); an agent's entries across its sessions
// have none (migration 0034): they are read newest written first, the table backwards by row id.
describe('reading memory entries by kind on SQLite', () => {
  it('reads summaries through their partial index and entries backwards through the table', async () => {
    await withRecordedLtm(async ({ db, ltm, memory, statements }) => {
      await memory.append(sessionRef(), { role: 'user', content: 'a plain entry' });
      await db.run(
        'INSERT INTO memory_entries (session_key, memory_id, session_id, agent_id, kind, role, state, order_key, content, tokens, created_at_ms, updated_at_ms) ' +
          "VALUES ('agent:alpha:main', 9, 's-alpha-main', 'alpha', 'summary', 'system', 'active', 1, 'what was said', 5, 2, 2)",
      );
      // Written last, with a creation time before every other entry's (an import's backdated entry).
      await memory.append(sessionRef('other'), {
        role: 'user',
        content: 'an imported entry',
        createdAtMs: 1,
      });
      const plan = async (kind: 'entry' | 'summary') => {
        statements.length = 0;
        const rows = await ltm.listEntries({ agentId: 'alpha', includeArchived: true, kind }, 10);
        const detail = await queryPlan(db, statements[0]!);
        return { contents: rows.map((row) => row.content), detail };
      };
      expect(await plan('summary')).toEqual({
        contents: ['what was said'],
        detail: expect.stringContaining('memory_entries_by_agent_kind'),
      });
      const entries = await plan('entry');
      expect(entries.contents).toEqual(['an imported entry', 'a plain entry']);
      expect(entries.detail).toBe('SCAN e');
      // Within one session, newest written first as well (decision 0036): by MemoryID, so an entry written
      // last with an earlier creation time comes first.
      await memory.append(sessionRef(), { role: 'user', content: 'imported into main', createdAtMs: 1 });
      const main = await ltm.listEntries(
        { agentId: 'alpha', sessionKey: sessionRef().sessionKey, includeArchived: true, kind: 'entry' },
        10,
      );
      expect(main.map((row) => row.content)).toEqual(['imported into main', 'a plain entry']);
      const indexes = await db.all<{ name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'memory_entries' AND name LIKE 'memory_entries_by_agent%'",
      );
      expect(indexes.map((index) => index.name)).toEqual(['memory_entries_by_agent_kind']);
    });
  });
});

// agentd keeps no planner statistics, and without them SQLite takes the agent's index for any `agent_id = ?`:
// a lookup by address or a join of ranked candidates then walks every entry of the agent (all of them in a
// one-agent store). Each statement below must find its rows by address, row id or FTS5 candidate instead.
describe('automatic recall, addressed reads and session lists on SQLite', () => {
  it('find their rows by address, session key or candidate, never by walking the agent index', async () => {
    await withRecordedLtm(async ({ db, ltm, memory, statements }) => {
      const garden = sessionRef('garden');
      const kitchen = sessionRef('kitchen');
      await memory.append(garden, { role: 'user', content: 'the roses need water on tuesdays' });
      await memory.append(garden, { role: 'assistant', content: 'noted: water the roses' });
      await memory.append(kitchen, { role: 'user', content: 'the oven runs hot' });
      await memory.append(kitchen, { role: 'assistant', content: 'bake the bread cooler then' });
      const filter: EntryFilter = { agentId: 'alpha', includeArchived: false };
      const addresses = [
        { sessionKey: garden.sessionKey, memoryId: 1 },
        { sessionKey: kitchen.sessionKey, memoryId: 2 },
      ];

      const planOf = async (name: string) => {
        const statement = statements.find(({ sql }) => sql.includes('memory_entries e'));
        if (!statement) throw new Error(`${name} read no entry`);
        statements.length = 0;
        return `${name}: ${await queryPlan(db, statement)}`;
      };
      const plans: string[] = [];

      const lines = await ltm.turnLinesAt(filter, addresses);
      expect(lines.map((line) => line.content).sort()).toEqual([
        'bake the bread cooler then',
        'the roses need water on tuesdays',
      ]);
      plans.push(await planOf('turnLinesAt'));

      const turns = await ltm.turnsAt(filter, addresses);
      expect(turns.map((entry) => entry.memoryId).sort()).toEqual([1, 2]);
      plans.push(await planOf('turnsAt'));

      const byIds = await ltm.entriesByIds(filter, addresses, 10);
      expect(byIds).toHaveLength(2);
      plans.push(await planOf('entriesByIds'));

      const ranked = await ltm.rankedLines(filter, ['roses'], 10, { before: 0.5 }, Number.POSITIVE_INFINITY);
      expect(ranked.order === 'rank' && ranked.lines.map((line) => line.content).sort()).toEqual([
        'noted: water the roses',
        'the roses need water on tuesdays',
      ]);
      plans.push(await planOf('rankedLines'));

      const full = await ltm.fullText(filter, ['oven'], 10, { before: 0.5 });
      expect(full.map((row) => row.content)).toContain('the oven runs hot');
      plans.push(await planOf('fullText'));

      // `memory.query` by topic: FTS5's matches newest first, each looked up by row id.
      const onTopic = await ltm.topic(filter, 'roses', 10);
      expect(onTopic.map((entry) => entry.content)).toEqual([
        'noted: water the roses',
        'the roses need water on tuesdays',
      ]);
      plans.push(await planOf('topic'));

      // One session's list reads that session's range of the address index, not the agent's newest entries
      // down to the session's.
      const listed = await ltm.listEntries({ ...filter, sessionKey: garden.sessionKey }, 10);
      expect(listed.map((entry) => entry.content)).toEqual([
        'noted: water the roses',
        'the roses need water on tuesdays',
      ]);
      const listPlan = await planOf('listEntries');
      expect(listPlan).toContain('sqlite_autoindex_memory_entries_1 (session_key=?)');
      // Newest written first is that range backwards: `limit` rows, whatever the session's size, no sort.
      expect(listPlan).not.toContain('TEMP B-TREE');
      plans.push(listPlan);
      // Its summaries through their partial index by key (migration 0035): the key's plain entries, however
      // many, are not walked to find none.
      await ltm.listEntries({ ...filter, sessionKey: garden.sessionKey, kind: 'summary' }, 10);
      const summariesPlan = await planOf('listEntries of summaries');
      expect(summariesPlan).toContain('memory_entries_summaries_by_session (session_key=?)');
      expect(summariesPlan).not.toContain('TEMP B-TREE');

      for (const plan of plans) {
        expect(plan).not.toContain('memory_entries_by_agent');
        expect(plan).not.toMatch(/SCAN e\b/);
        expect(plan).toMatch(/sqlite_autoindex_memory_entries_1 \(session_key=\?|INTEGER PRIMARY KEY/);
      }
    });
  });
});

// No index of their own (migration 0032): a session instance's entries are the key's MemoryIDs from the ids
// its row keeps, read through the unique (session_key, memory_id) index and filtered by the instance.
describe("a session instance's load and archive on SQLite", () => {
  it("read the key's range of MemoryIDs from the instance's bounds", async () => {
    await withRecordedLtm(async ({ db, ltm, memory, statements }) => {
      const ref = sessionRef();
      for (let index = 0; index < 3; index++)
        await memory.appendBatch(ref, [
          { role: 'user', content: `question ${index}` },
          { role: 'assistant', content: `answer ${index}` },
        ]);
      const row = await ltm.getSession(ref.sessionId);
      expect(row?.ids).toEqual({ firstId: 1, liveFromId: 1 });
      statements.length = 0;
      const loadedRows = await ltm.loadRam(ref, row!.ids, 8);
      expect(loadedRows).toHaveLength(6);
      expect(statements).toHaveLength(2);
      const plans = [await queryPlan(db, statements[0]!), await queryPlan(db, statements[1]!)];
      const archive: RecordedStatement[] = [];
      const recordingTx = {
        dialect: db.dialect,
        all: db.all.bind(db),
        get: db.get.bind(db),
        run: (sql: string, params?: ReadonlyArray<unknown>) => {
          archive.push({ sql, params: [...(params ?? [])] });
          return db.run(sql, params as never);
        },
      };
      expect(await ltm.archiveSession(recordingTx, ref, 'reset', 5)).toBe(6);
      plans.push(await queryPlan(db, archive.find(({ sql }) => sql.startsWith('UPDATE memory_entries'))!));
      for (const plan of plans)
        expect(plan).toMatch(
          /^SEARCH (e|memory_entries) USING INDEX sqlite_autoindex_memory_entries_1 \(session_key=\? AND memory_id>\?\)/,
        );
    });
  });
});

// Within one session key, FTS5 reads the key's span of row ids only: without it, an old session's query by a
// common word walked every newer match of every other session before finding its own.
describe('memory.query by topic within one session on SQLite', () => {
  it("bounds FTS5's scan by the key's row ids and still returns only the key's matches", async () => {
    await withRecordedLtm(async ({ db, ltm, memory, statements }) => {
      const old = sessionRef('old');
      const busy = sessionRef('busy');
      const quiet = sessionRef('quiet');
      await memory.append(old, { role: 'user', content: 'the lantern by the door' });
      // Another key's match inside the old key's span: the key's test must still keep it out.
      await memory.append(busy, { role: 'user', content: 'a lantern in the hall' });
      await memory.append(old, { role: 'assistant', content: 'the lantern is lit' });
      for (let index = 0; index < 5; index++)
        await memory.append(busy, { role: 'user', content: `lantern number ${index}` });
      await memory.append(quiet, { role: 'user', content: 'nothing about lights' });
      const inKey = async (ref: typeof old) => {
        statements.length = 0;
        const rows = await ltm.topic(
          { agentId: 'alpha', includeArchived: true, sessionKey: ref.sessionKey },
          'lantern',
          10,
        );
        return rows.map((row) => row.content);
      };
      expect(await inKey(old)).toEqual(['the lantern is lit', 'the lantern by the door']);
      const plan = await queryPlan(db, statements.find(({ sql }) => sql.includes('memory_fts MATCH'))!);
      // FTS5 is the outer loop, given the phrase (`M`) and both ends of the span (`>` and `<`, rowid
      // constraints), which come from the key's range of the address index; no sort.
      expect(plan).toMatch(/^SCAN memory_fts VIRTUAL TABLE INDEX \d+:M\d+(><|<>) \|/);
      expect(plan.match(/COVERING INDEX sqlite_autoindex_memory_entries_1 \(session_key=\?\)/g)).toHaveLength(
        2,
      );
      expect(plan).not.toContain('TEMP B-TREE');
      expect(await inKey(busy)).toEqual([
        'lantern number 4',
        'lantern number 3',
        'lantern number 2',
        'lantern number 1',
        'lantern number 0',
        'a lantern in the hall',
      ]);
      expect(await inKey(quiet)).toEqual([]);
      expect(await inKey(sessionRef('never-used'))).toEqual([]);
    });
  });
});

// The span's ends above are the rows of the key's first and last MemoryIDs, which holds while a key's row ids
// grow with its MemoryIDs: every way memory writes rows keeps that order.
describe("a session key's row ids on SQLite", () => {
  it('grow with its MemoryIDs through appends, evictions, a summary, a second instance and a batch', async () => {
    await withRecordedLtm(
      async ({ db, memory }) => {
        const first = sessionRef('grow', 'alpha', 's-first');
        for (let index = 0; index < 9; index++)
          await memory.append(first, {
            role: index % 2 ? 'assistant' : 'user',
            content: `turn ${index} lantern`,
          });
        await memory.summarize(first, { maxEntries: 2 });
        await memory.archive(first.sessionId, 'reset');
        const second = sessionRef('grow', 'alpha', 's-second');
        await memory.appendBatch(
          second,
          Array.from({ length: 12 }, (_, index) => ({
            role: 'user' as const,
            content: `batch ${index} lantern`,
          })),
        );
        const rows = await db.all<{ memory_id: number; id: number; state: string; content: string }>(
          "SELECT memory_id, id, state, content FROM memory_entries WHERE session_key = 'agent:alpha:grow' ORDER BY memory_id",
        );
        const states = new Set(rows.map((row) => row.state));
        expect([...states].sort()).toEqual(['active', 'evicted', 'summarized', 'tombstone']);
        expect(rows.map((row) => row.id)).toEqual(
          rows.map((row) => row.id).sort((left, right) => left - right),
        );
        // Both instances' matches, the newest first, through the span.
        const found = await memory.query({
          agentId: 'alpha',
          sessionKey: 'agent:alpha:grow',
          topic: 'lantern',
          limit: 100,
        });
        const matching = rows.filter((row) => row.state !== 'tombstone' && /\blantern\b/.test(row.content));
        expect(found.map((item) => item.address)).toEqual(
          matching.reverse().map((row) => `agent:alpha:grow#${row.memory_id}`),
        );
      },
      { config: { maxActiveEntries: 6, evictDownToRatio: 0.5 } },
    );
  });
});

// Entries have no index by agent (migration 0034), but summaries keep a partial one (0024): a statement that
// finds its rows by address or FTS5 candidate must not walk it when its filter names a kind.
describe('addressed reads and ranking queries filtered by a kind on SQLite', () => {
  it("leave the summaries' partial index by agent alone", async () => {
    await withRecordedLtm(async ({ db, ltm, memory, statements }) => {
      await memory.append(sessionRef(), { role: 'user', content: 'roses are red' });
      const filter: EntryFilter = { agentId: 'alpha', includeArchived: true, kind: 'summary' };
      const addresses = [{ sessionKey: 'agent:alpha:main', memoryId: 1 }];
      await ltm.turnLinesAt(filter, addresses);
      await ltm.rankedLines(filter, ['roses'], 10, { before: 0.5 }, Number.POSITIVE_INFINITY);
      await ltm.fullText(filter, ['roses'], 10, { before: 0.5 });
      expect(statements).toHaveLength(3);
      for (const statement of statements)
        expect(await queryPlan(db, statement)).not.toContain('memory_entries_by_agent_kind');
    });
  });
});
