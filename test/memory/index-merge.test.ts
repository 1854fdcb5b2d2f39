import { describe, expect, it } from 'vitest';
import { createLtmStore } from '../../src/memory/ltm-store.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { describeEachDatabase, useMigratedSqliteFile } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

type Memory = ReturnType<typeof createHarness>['memory'];

/**
 * `batches` transactions of 60 turns from turn `from` on, each indexed before the next (a store of its own
 * brings the index up to date): a segment each on SQLite.
 */
async function writeTurns(db: SqlDatabase, memory: Memory, from: number, batches: number): Promise<void> {
  for (let batch = from / 60; batch < from / 60 + batches; batch++) {
    await createLtmStore(db, { sqliteVec: false }).indexPending();
    await memory.appendBatch(
      sessionRef(batch % 2 ? 'ops' : 'main'),
      Array.from({ length: 60 }, (_, index) => {
        const turn = batch * 60 + index;
        return {
          role: index % 2 ? ('assistant' as const) : ('user' as const),
          content:
            turn % 97 === 0
              ? `the zeppelin hangar note ${turn}`
              : turn % 13 === 0
                ? `hangar inventory ${turn}`
                : `filler turn ${turn} about lanterns`,
        };
      }),
    );
  }
}

/**
 * 1,200 turns written 60 per transaction, past the 1,000 rows a merge waits for: 20 segments on SQLite, of
 * which FTS5's own automerge leaves several.
 */
async function seed(db: SqlDatabase): Promise<Memory> {
  const harness = createHarness(db, { config: { maxActiveEntries: 16 } });
  await writeTurns(db, harness.memory, 0, 20);
  return harness.memory;
}

/** Automatic recall of "zeppelin": a search under a row budget, which notes the index's size. */
const recallZeppelin = (memory: Memory) =>
  memory.recallForPrompt({ agentId: 'alpha', sessionKey: 'agent:alpha:ask', query: 'zeppelin' });

/** The index's segments once it is one, or after `waitMs` (a background merge takes some time). */
async function segmentsWithin(db: SqlDatabase, waitMs: number): Promise<number> {
  const ltm = createLtmStore(db, { sqliteVec: false });
  const deadline = Date.now() + waitMs;
  while ((await ltm.indexSegments()) > 1 && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 10));
  return ltm.indexSegments();
}

// Every batch the full-text index takes leaves its own FTS5 segment, and every term lookup reads each
// segment: the SQLite full-text index is merged into one, in the background once it has grown, and search
// results do not depend on how it is split.
describeEachDatabase('merging the full-text index', (getDb) => {
  const queries = ['zeppelin hangar', 'hangar inventory', 'lanterns zeppelin', 'filler'];
  const answers = async (memory: Memory) =>
    Promise.all(
      queries.map(async (query) => ({
        hits: (await memory.search({ agentId: 'alpha', query, limit: 10, maxScoredRows: 100 })).map(
          (hit) => `${hit.address} ${hit.score}`,
        ),
        block: await memory.recallForPrompt({ agentId: 'alpha', sessionKey: 'agent:alpha:ask', query }),
      })),
    );

  it('merges into one segment, and searches answer the same before and after', async () => {
    const memory = await seed(getDb());
    const ltm = createLtmStore(getDb(), { sqliteVec: false });
    const sqlite = getDb().dialect === 'sqlite';
    const segments = await ltm.indexSegments();
    if (sqlite) expect(segments).toBeGreaterThan(1);
    else expect(segments).toBe(0);
    const before = await answers(memory);
    expect(before.every(({ hits, block }) => hits.length > 0 && block !== '')).toBe(true);
    await ltm.mergeIndex();
    expect(await ltm.indexSegments()).toBe(sqlite ? 1 : 0);
    expect(await answers(memory)).toEqual(before);
  });

  it('merges in the background once a search sees that the index has grown', async () => {
    const memory = await seed(getDb());
    const ltm = createLtmStore(getDb(), { sqliteVec: false });
    if (getDb().dialect !== 'sqlite') {
      await memory.search({ agentId: 'alpha', query: 'zeppelin', maxScoredRows: 100 });
      expect(await ltm.indexSegments()).toBe(0);
      return;
    }
    const segments = await ltm.indexSegments();
    expect(segments).toBeGreaterThan(1);
    // The store's first search under a row budget starts the merge; the search itself does not wait for it.
    await recallZeppelin(memory);
    expect(await ltm.indexSegments()).toBe(segments);
    expect(await segmentsWithin(getDb(), 5_000)).toBe(1);
    // New writes add segments again; until the table has doubled they stay until the next merge.
    await memory.appendBatch(sessionRef('main'), [{ role: 'user', content: 'a zeppelin again' }]);
    await recallZeppelin(memory);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await ltm.indexSegments()).toBe(2);
  });
});

// Postgres's GIN indexes have no segments to merge (above): this part is SQLite's alone.
describe('merging the full-text index again [sqlite]', () => {
  const file = useMigratedSqliteFile('agentd-index-merge-');
  const highestRowId = async () =>
    Number((await file.db().get<{ id: number }>('SELECT max(id) AS id FROM memory_entries'))?.id);
  const writeUntil = async (memory: Memory, from: number, rowId: number) => {
    let written = from;
    while ((await highestRowId()) < rowId) {
      await writeTurns(file.db(), memory, written, 1);
      written += 60;
    }
    return written;
  };

  it('merges again once the table has doubled since the last merge, not at every tenth of growth', async () => {
    const memory = await seed(file.db());
    await recallZeppelin(memory);
    expect(await segmentsWithin(file.db(), 5_000)).toBe(1);
    const mergedAt = await highestRowId();
    // Three quarters of the table's size again, in segments of their own: well past a tenth, short of doubling.
    const written = await writeUntil(memory, 1_200, mergedAt * 1.75);
    await recallZeppelin(memory);
    expect(await segmentsWithin(file.db(), 300)).toBeGreaterThan(1);
    await writeUntil(memory, written, mergedAt * 2 + 1);
    await recallZeppelin(memory);
    expect(await segmentsWithin(file.db(), 5_000)).toBe(1);
  });
});
