import { expect, it } from 'vitest';
import { createLtmStore } from '../../src/memory/ltm-store.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

// Every batch the full-text index takes leaves its own FTS5 segment, and every term lookup reads each
// segment: the SQLite full-text index is merged into one, in the background once it has grown, and search
// results do not depend on how it is split.
describeEachDatabase('merging the full-text index', (getDb) => {
  /**
   * 1,200 turns written 60 per transaction, each indexed before the next (a store of its own brings the
   * index up to date), past the 1,000 rows a merge waits for: 20 segments on SQLite, of which FTS5's own
   * automerge leaves several.
   */
  const seed = async () => {
    const harness = createHarness(getDb(), { config: { maxActiveEntries: 16 } });
    for (let batch = 0; batch < 20; batch++) {
      await createLtmStore(getDb(), { sqliteVec: false }).indexPending();
      await harness.memory.appendBatch(
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
    return harness.memory;
  };
  const queries = ['zeppelin hangar', 'hangar inventory', 'lanterns zeppelin', 'filler'];
  const answers = async (memory: Awaited<ReturnType<typeof seed>>) =>
    Promise.all(
      queries.map(async (query) => ({
        hits: (await memory.search({ agentId: 'alpha', query, limit: 10, maxScoredRows: 100 })).map(
          (hit) => `${hit.address} ${hit.score}`,
        ),
        block: await memory.recallForPrompt({ agentId: 'alpha', sessionKey: 'agent:alpha:ask', query }),
      })),
    );

  it('merges into one segment, and searches answer the same before and after', async () => {
    const memory = await seed();
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
    const memory = await seed();
    const ltm = createLtmStore(getDb(), { sqliteVec: false });
    if (getDb().dialect !== 'sqlite') {
      await memory.search({ agentId: 'alpha', query: 'zeppelin', maxScoredRows: 100 });
      expect(await ltm.indexSegments()).toBe(0);
      return;
    }
    const segments = await ltm.indexSegments();
    expect(segments).toBeGreaterThan(1);
    // The store's first search under a row budget starts the merge; the search itself does not wait for it.
    await memory.recallForPrompt({ agentId: 'alpha', sessionKey: 'agent:alpha:ask', query: 'zeppelin' });
    expect(await ltm.indexSegments()).toBe(segments);
    const deadline = Date.now() + 5_000;
    while ((await ltm.indexSegments()) > 1 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await ltm.indexSegments()).toBe(1);
    // New writes add segments again; under a tenth of growth they stay until the next merge.
    await memory.appendBatch(sessionRef('main'), [{ role: 'user', content: 'a zeppelin again' }]);
    await memory.recallForPrompt({ agentId: 'alpha', sessionKey: 'agent:alpha:ask', query: 'zeppelin' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await ltm.indexSegments()).toBe(2);
  });
});
