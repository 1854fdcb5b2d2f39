import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { MemoryService } from '../../src/memory/index.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { openTestDatabase } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

// The row budget of a full-text search (config.recall.maxScoredRows): bm25() and ts_rank cost about a
// microsecond for every row they rank, so past the budget common terms are left out, then only the newest
// matches are ranked. Under the budget the ranking is the exact one of the dialect.
for (const dialect of ['sqlite', 'postgres'] as const)
  describe(`memory search with a bounded number of ranked rows [${dialect}]`, () => {
    let db: SqlDatabase;
    beforeEach(async () => {
      db = await openTestDatabase(dialect);
    });
    afterEach(async () => {
      await db.close();
    });

    /**
     * 300 turns, far apart from each other's context (each separated by unrelated filler turns): the first
     * 30 say "lantern" three times (the best BM25 matches), the rest say it once; turn 5 also names "zephyr".
     */
    const seed = async (config: { maxScoredRows?: number; promptMaxScoredRows?: number }) => {
      const harness = createHarness(db, {
        config: { maxActiveEntries: 16, recall: config },
      });
      const entries = Array.from({ length: 300 }, (_, index) => {
        const lantern = index < 30 ? 'lantern lantern lantern' : 'lantern';
        const zephyr = index === 5 ? ' zephyr' : '';
        return [
          { role: 'user' as const, content: `note ${index}: ${lantern}${zephyr}` },
          { role: 'assistant' as const, content: `filler alpha ${index}` },
          { role: 'user' as const, content: `filler beta ${index}` },
          { role: 'assistant' as const, content: `filler gamma ${index}` },
        ];
      }).flat();
      for (let offset = 0; offset < entries.length; offset += 200)
        await harness.memory.appendBatch(sessionRef(), entries.slice(offset, offset + 200));
      return harness.memory;
    };
    /** Alpha's ten best hits for "lantern", under the search's own row budget when one is given. */
    const lanternHits = (memory: MemoryService, maxScoredRows?: number) =>
      memory.search({
        agentId: 'alpha',
        query: 'lantern',
        limit: 10,
        ...(maxScoredRows === undefined ? {} : { maxScoredRows }),
      });
    /** The note number of each hit that is a note (neighbouring filler turns are left out). */
    const notes = (hits: ReadonlyArray<{ content: string }>) =>
      hits.flatMap((hit) => {
        const match = /^note (\d+):/.exec(hit.content);
        return match ? [Number(match[1])] : [];
      });

    it('ranks every match exactly while they fit the budget', async () => {
      const memory = await seed({});
      const hits = await lanternHits(memory);
      // The three-times notes are the best BM25 matches, wherever they are in time.
      expect(notes(hits).every((note) => note < 30)).toBe(true);
      expect(notes(hits).length).toBeGreaterThan(0);
    });

    it('ranks only the newest matches when even the rarest term matches more rows than the budget', async () => {
      const memory = await seed({ maxScoredRows: 100 });
      const hits = await lanternHits(memory);
      // Only the newest 100 matching rows (of 300 notes and their context rows) were ranked: the old
      // three-times notes are out of reach, the recent ones rank.
      expect(notes(hits).length).toBeGreaterThan(0);
      expect(notes(hits).every((note) => note >= 200)).toBe(true);
    });

    it('leaves a common term out and keeps the rare one', async () => {
      const near = (note: number) => Math.abs(note - 5) <= 1;
      // Under the budget, "lantern" ranks too: notes far from note 5 fill the list.
      const exact = await (await seed({})).search({ agentId: 'alpha', query: 'zephyr lantern', limit: 30 });
      expect(notes(exact).some((note) => !near(note))).toBe(true);
      await db.close();
      db = await openTestDatabase(dialect);
      const memory = await seed({ maxScoredRows: 100 });
      const hits = await memory.search({ agentId: 'alpha', query: 'zephyr lantern', limit: 30 });
      // "zephyr" was ranked: note 5, the turns around it and (through them) the notes next to it. Too few for
      // the limit, they are followed by the newest matches of "lantern", the term left out.
      expect(hits[0]?.content).toBe('note 5: lantern lantern lantern zephyr');
      const ranked = notes(hits);
      const firstNewest = ranked.findIndex((note) => !near(note));
      expect(firstNewest).toBeGreaterThan(0);
      expect(ranked.slice(0, firstNewest).every(near)).toBe(true);
      expect(ranked.slice(firstNewest).every((note) => note >= 250)).toBe(true);
      // A term no row has does not count against the budget, and the search still answers.
      const unknown = await memory.search({ agentId: 'alpha', query: 'quasar zephyr', limit: 3 });
      expect(unknown[0]?.content).toBe('note 5: lantern lantern lantern zephyr');
      // Its count (0) is kept, yet the first entry that has it is found at once.
      await memory.appendBatch(sessionRef(), [{ role: 'user', content: 'a quasar at last' }]);
      const found = await memory.search({ agentId: 'alpha', query: 'quasar zephyr', limit: 10 });
      expect(found.map((hit) => hit.content)).toContain('a quasar at last');
    });

    it('takes a smaller budget per search, never a larger one, and automatic recall uses its own', async () => {
      const memory = await seed({ maxScoredRows: 5_000, promptMaxScoredRows: 100 });
      const narrow = await lanternHits(memory, 100);
      expect(notes(narrow).every((note) => note >= 200)).toBe(true);
      const unbounded = await lanternHits(memory, Number.NaN);
      expect(notes(unbounded).every((note) => note < 30)).toBe(true);
      // Automatic recall ranks the newest 100 matching rows only.
      const block = await memory.recallForPrompt({
        agentId: 'alpha',
        sessionKey: 'agent:alpha:other',
        query: 'lantern',
      });
      const recalled = [...block.matchAll(/note (\d+):/g)].map((match) => Number(match[1]));
      expect(recalled.length).toBeGreaterThan(0);
      expect(recalled.every((note) => note >= 200)).toBe(true);
      await db.close();
      db = await openTestDatabase(dialect);
      const capped = await seed({ maxScoredRows: 100 });
      const asked = await lanternHits(capped, 100_000);
      expect(notes(asked).every((note) => note >= 200)).toBe(true);
    });

    it("looks at the newest matches of the budget only, and never returns another agent's", async () => {
      const memory = await seed({ maxScoredRows: 100 });
      const beta = { sessionId: 'beta-1', sessionKey: 'agent:beta:main', agentId: 'beta' };
      const betaNotes = (from: number, count: number) =>
        Array.from({ length: count }, (_, index) => ({
          role: 'user' as const,
          content: `beta ${from + index}: lantern`,
        }));
      // 30 newer matches of beta's: alpha's newest notes are still among the newest 100 matching rows.
      await memory.appendBatch(beta, betaNotes(0, 30));
      const alpha = await lanternHits(memory);
      expect(notes(alpha).length).toBeGreaterThan(0);
      expect(notes(alpha).every((note) => note >= 250)).toBe(true);
      expect(alpha.every((hit) => hit.sessionKey === 'agent:alpha:main')).toBe(true);
      // 200 more: the newest 100 matches are all beta's, and alpha's older ones are past the budget.
      await memory.appendBatch(beta, betaNotes(30, 200));
      expect(await lanternHits(memory)).toEqual([]);
      const found = await memory.search({ agentId: 'beta', query: 'lantern', limit: 10 });
      expect(found.length).toBe(10);
      expect(found.every((hit) => hit.sessionKey === 'agent:beta:main')).toBe(true);
      // A rarer word is still found for alpha however many rows of beta's there are.
      expect((await memory.search({ agentId: 'alpha', query: 'zephyr lantern', limit: 1 }))[0]?.content).toBe(
        'note 5: lantern lantern lantern zephyr',
      );
    });

    it('counts a term again once the memory has grown past a tenth', async () => {
      const harness = createHarness(db, { config: { maxActiveEntries: 16, recall: { maxScoredRows: 100 } } });
      const { memory } = harness;
      const turns = (count: number, word: string, from: number) =>
        Array.from({ length: count }, (_, index) => ({
          role: index % 2 ? ('assistant' as const) : ('user' as const),
          content: `${index % 5 === 0 ? word : 'filler'} ${from + index}`,
        }));
      await memory.appendBatch(sessionRef(), turns(200, 'other', 0));
      await memory.appendBatch(sessionRef(), [{ role: 'user', content: 'comet sighting' }]);
      // "comet" is rare: with "other" (200 / 5 turns, each seen by 5 rows' context: over the budget) it is searched alone.
      let hits = await memory.search({ agentId: 'alpha', query: 'comet other', limit: 3 });
      expect(hits[0]?.content).toBe('comet sighting');
      // Now "comet" becomes common, newer than anything else; the cached count would still call it rare.
      await memory.appendBatch(sessionRef(), turns(400, 'comet', 1000));
      hits = await memory.search({ agentId: 'alpha', query: 'comet', limit: 10 });
      // Recounted: over the budget, so only the newest matches are ranked, and the first sighting is not among them.
      expect(hits.map((hit) => hit.content)).not.toContain('comet sighting');
      expect(hits.length).toBeGreaterThan(0);
    });

    it('counts a term again once the rows added since could have taken it past the budget, however little the memory grew', async () => {
      const harness = createHarness(db, { config: { maxActiveEntries: 16, recall: { maxScoredRows: 100 } } });
      const { memory } = harness;
      const turns = (count: number, content: (index: number) => string) =>
        Array.from({ length: count }, (_, index) => ({
          role: index % 2 ? ('assistant' as const) : ('user' as const),
          content: content(index),
        }));
      for (let from = 0; from < 2_000; from += 500)
        await memory.appendBatch(
          sessionRef(),
          turns(500, (index) => `filler ${from + index}`),
        );
      await memory.appendBatch(sessionRef(), [{ role: 'user', content: 'comet comet comet sighting' }]);
      // Counted while rare: one row.
      let hits = await memory.search({ agentId: 'alpha', query: 'comet', limit: 3 });
      expect(hits[0]?.content).toBe('comet comet comet sighting');
      // A conversation that keeps saying it: 150 rows more, over the budget of 100, though the memory grew
      // by under a tenth. Ranked as if still rare, every match would be ranked, and the best are the oldest
      // (the three-times row is in their context).
      await memory.appendBatch(
        sessionRef(),
        turns(150, (index) => `comet ${index}`),
      );
      hits = await memory.search({ agentId: 'alpha', query: 'comet', limit: 10 });
      // Recounted: over the budget, so only its newest 100 matches are ranked.
      expect(hits.length).toBe(10);
      for (const hit of hits)
        expect(Number(/^comet (\d+)$/.exec(hit.content)?.[1])).toBeGreaterThanOrEqual(50);
    });

    it("past the budget, automatic recall lists the newest matches outside the asking context, newest first, passing over a loaded context's turns unread", async () => {
      const config = { maxActiveEntries: 64, recall: { promptMaxScoredRows: 40 } };
      const { memory } = createHarness(db, { config });
      const turns = (key: string) =>
        Array.from({ length: 30 }, (_, index) => ({
          role: index % 2 ? ('assistant' as const) : ('user' as const),
          content: `${key} hangar ${index + 1}`,
        }));
      await memory.appendBatch(sessionRef('old'), turns('old'));
      // The asking session's 30 turns are its context and the newest matches of "hangar" (over the budget).
      await memory.appendBatch(sessionRef('main'), turns('main'));
      const ask = { agentId: 'alpha', sessionKey: 'agent:alpha:main', query: 'hangar' };
      const rowReads = vi.spyOn(db, 'all');
      const readsOf = async (service: MemoryService) => {
        rowReads.mockClear();
        const block = await service.recallForPrompt(ask);
        const reads = rowReads.mock.calls.filter(([sql]) => sql.includes('WHERE e.id IN (')).length;
        const lookups = rowReads.mock.calls.filter(([sql]) => sql.includes('ORDER BY')).length;
        return { block, reads, lookups };
      };
      const loaded = await readsOf(memory);
      expect([...loaded.block.matchAll(/^- \[([^,]+),/gm)].map((match) => match[1])).toEqual(
        Array.from({ length: 8 }, (_, index) => `agent:alpha:old#${30 - index}`),
      );
      // Every line was kept as it was committed, and the loaded context says which are in it; the one
      // lookup of the newest matches reached past the context.
      expect(loaded.reads).toBe(0);
      expect(loaded.lookups).toBe(1);
      // A service without the session loaded reads the rows for their state, and lists the same.
      const elsewhere = await readsOf(createHarness(db, { config }).memory);
      expect(elsewhere.block).toBe(loaded.block);
      expect(elsewhere.reads).toBeGreaterThan(0);
      rowReads.mockRestore();
    });

    /** `count` turns about hangars in session "old", then in session "main" the question of the next two tests. */
    const hangarsThenQuestion = async (memory: MemoryService, count: number) => {
      await memory.appendBatch(
        sessionRef('old'),
        Array.from({ length: count }, (_, index) => ({
          role: index % 2 ? ('assistant' as const) : ('user' as const),
          content: `hangar ${index + 1}`,
        })),
      );
      await memory.append(sessionRef('main'), { role: 'user', content: 'which hangar had the beacon?' });
    };

    it("fills automatic recall with a left-out term's newest matches when the rare ones find only the asking message", async () => {
      const harness = createHarness(db, {
        config: { maxActiveEntries: 64, recall: { promptMaxScoredRows: 40 } },
      });
      const { memory } = harness;
      // A chat turn commits the message before it recalls: "beacon" has one match, the message itself,
      // which is in the asking context; "hangar" matches more rows than the budget and is left out.
      await hangarsThenQuestion(memory, 60);
      const listed = async (query: string) =>
        [
          ...(
            await memory.recallForPrompt({ agentId: 'alpha', sessionKey: 'agent:alpha:main', query })
          ).matchAll(/^- \[([^,]+),/gm),
        ].map((match) => match[1]);
      expect(await listed('which hangar had the beacon?')).toEqual(
        Array.from({ length: 8 }, (_, index) => `agent:alpha:old#${60 - index}`),
      );
      // A rare term's matches outside the context come first, the left-out term's newest after them, each
      // entry once.
      await memory.append(sessionRef('other'), { role: 'user', content: 'the beacon of hangar 31' });
      expect(await listed('which hangar had the beacon?')).toEqual([
        'agent:alpha:other#1',
        ...Array.from({ length: 7 }, (_, index) => `agent:alpha:old#${60 - index}`),
      ]);
    });

    it("follows a search's rare-term hits with a left-out term's newest matches when they are too few", async () => {
      const { memory } = createHarness(db, { config: { maxActiveEntries: 64 } });
      await hangarsThenQuestion(memory, 150);
      const hits = await memory.search({
        agentId: 'alpha',
        query: 'which hangar had the beacon?',
        limit: 8,
        maxScoredRows: 100,
      });
      expect(hits[0]?.content).toBe('which hangar had the beacon?');
      const rest = hits.slice(1).map((hit) => hit.address);
      expect(rest).toHaveLength(7);
      expect(new Set(rest).size).toBe(7);
      // The newest matches of "hangar", which the budget left out, and no older ones.
      for (const address of rest)
        expect(Number(/^agent:alpha:old#(\d+)$/.exec(address!)?.[1])).toBeGreaterThan(130);
      for (const hit of hits.slice(1)) expect(hit.score).toBeLessThan(hits[0]!.score);
    });

    it('reads no left-out matches when the kept terms give as many rows as the search lists', async () => {
      // Every statement's text: the left-out term's newest matches are the only rows read newest first.
      const sent: string[] = [];
      const recording: SqlDatabase = {
        ...db,
        all: (sql, params) => {
          sent.push(sql);
          return db.all(sql, params);
        },
      };
      const newestReads = () =>
        sent.filter((sql) => /ORDER BY (memory_fts\.rowid|e\.id) DESC LIMIT \?\)/.test(sql)).length;
      const { memory } = createHarness(recording, { config: { maxActiveEntries: 64 } });
      await hangarsThenQuestion(memory, 150);
      const search = async (limit: number) => {
        const before = newestReads();
        const hits = await memory.search({
          agentId: 'alpha',
          query: 'which hangar had the beacon?',
          limit,
          maxScoredRows: 100,
        });
        return { hits, newestReads: newestReads() - before };
      };
      // The question alone fills a list of one: nothing more is read, although the search ranks a pool of
      // 100 candidates to smooth them.
      const one = await search(1);
      expect(one.hits.map((hit) => hit.content)).toEqual(['which hangar had the beacon?']);
      expect(one.newestReads).toBe(0);
      const eight = await search(8);
      expect(eight.hits).toHaveLength(8);
      expect(eight.newestReads).toBeGreaterThan(0);
    });

    it('past the budget, lists what it keeps of each commit only while the rows exist, outside the context and of the agent', async () => {
      const config = { maxActiveEntries: 4, evictDownToRatio: 1, recall: { promptMaxScoredRows: 30 } };
      const { memory } = createHarness(db, { config });
      // The last turn of each key is long, on several lines: its line is made (and copied) as it is committed.
      const turns = (key: string, count: number) =>
        Array.from({ length: count }, (_, index) => ({
          role: index % 2 ? ('assistant' as const) : ('user' as const),
          content: `${key} hangar ${index + 1}${index === count - 1 ? `  with\n\t${'long '.repeat(200)}` : ''}`,
        }));
      await memory.appendBatch(sessionRef('old'), turns('old', 24));
      await memory.appendBatch(sessionRef('gone'), turns('gone', 12));
      // Another agent's turns are the newest matches of all.
      await memory.appendBatch(sessionRef('other', 'beta'), turns('other', 12));
      // The asking session's own four turns fill its context of four.
      await memory.appendBatch(sessionRef('main'), turns('main', 4));
      const ask = { agentId: 'alpha', sessionKey: 'agent:alpha:main', query: 'hangar' };
      const listed = async (service = memory) =>
        [...(await service.recallForPrompt(ask)).matchAll(/^- \[([^,]+),/gm)].map((match) => match[1]);
      expect(memory.status().promptLineCache.lines).toBe(52);
      expect(await listed()).toEqual(
        Array.from({ length: 8 }, (_, index) => `agent:alpha:gone#${12 - index}`),
      );
      // A restarted service, which keeps nothing yet, reads the same lines.
      const restarted = createHarness(db, { config }).memory;
      expect(await restarted.recallForPrompt(ask)).toBe(await memory.recallForPrompt(ask));
      // Deleted rows are not listed from what was kept of them.
      await memory.deleteSessionKey('agent:alpha:gone');
      expect(await listed()).toEqual(
        Array.from({ length: 8 }, (_, index) => `agent:alpha:old#${24 - index}`),
      );
      // Two more turns (matching through the turns before them, and in context) evict the asking session's
      // first two: those leave its context and may be recalled now.
      await memory.appendBatch(sessionRef('main'), [
        { role: 'user', content: 'unrelated' },
        { role: 'assistant', content: 'unrelated too' },
      ]);
      expect((await listed()).slice(0, 3)).toEqual([
        'agent:alpha:main#2',
        'agent:alpha:main#1',
        'agent:alpha:old#24',
      ]);
      expect(await restarted.recallForPrompt(ask)).toBe(await memory.recallForPrompt(ask));
    });

    it('keeps at most 4,096 committed entries for automatic recall, and reports them', async () => {
      const { memory } = createHarness(db, {
        config: { maxActiveEntries: 5_000, maxActiveTokens: 1_000_000 },
      });
      await memory.appendBatch(
        sessionRef(),
        Array.from({ length: 4_100 }, (_, index) => ({ role: 'user' as const, content: `note ${index}` })),
      );
      const { lines, chars } = memory.status().promptLineCache;
      expect(lines).toBe(4_096);
      // The contents of the newest 4,096 (the first four were dropped).
      const held = Array.from({ length: 4_096 }, (_, index) => `note ${index + 4}`.length);
      expect(chars).toBe(held.reduce((sum, length) => sum + length, 0));
      // Recall makes lines of the entries it lists: each one now holds its line instead of its content.
      const block = await memory.recallForPrompt({
        agentId: 'alpha',
        sessionKey: 'agent:alpha:elsewhere',
        query: 'note',
      });
      const listed = block.split('\n').filter((line) => line.startsWith('- ['));
      expect(listed.length).toBeGreaterThan(0);
      const grown = listed.reduce(
        (sum, line) => sum + line.length - /: (note \d+)$/.exec(line)![1]!.length,
        0,
      );
      expect(memory.status().promptLineCache.chars).toBe(chars + grown);
    });

    it('answers a topic lookup newest written first without reading every match', async () => {
      const memory = await seed({});
      const items = await memory.query({ agentId: 'alpha', topic: 'lantern', limit: 3 });
      expect(items.map((item) => ('content' in item ? item.content : item.text))).toEqual([
        'note 299: lantern',
        'note 298: lantern',
        'note 297: lantern',
      ]);
      // A backdated append is still the newest written.
      await memory.appendBatch(sessionRef(), [{ role: 'user', content: 'old lantern', createdAtMs: 1_000 }]);
      expect((await memory.query({ agentId: 'alpha', topic: 'lantern', limit: 1 }))[0]).toMatchObject({
        content: 'old lantern',
      });
    });
  });
