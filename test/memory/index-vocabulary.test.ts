import { readdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, vi } from 'vitest';
import { createLtmStore, type LtmStore, type StoredEntry } from '../../src/memory/ltm-store.js';
import { readVocabulary } from '../../src/memory/vocabulary-reader.js';
import { createSqliteDatabase, migrate, type SqlDatabase } from '../../src/store/index.js';
import { temporarySqliteFile, useMigratedSqliteFile } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

// The SQLite full-text index's vocabulary kept in JavaScript (ltm-store.ts, `vocabulary`): a search's words
// counted without a statement. A count may be too high (a row deleted since), never too low: a plan made
// from a low one would rank more rows than its budget.

/** Rows of the full-text index matching `word`, counted by FTS5 itself. */
async function matchingRows(db: SqlDatabase, word: string): Promise<number> {
  const row = await db.get<{ n: number }>('SELECT count(*) AS n FROM memory_fts WHERE memory_fts MATCH ?', [
    `"${word}"`,
  ]);
  return Number(row?.n ?? 0);
}

/**
 * `count` turns of `session` written by `ltm` itself, turn i naming inflected words, a number and, every 7th,
 * a word with accents; memory ids are the turn numbers plus one.
 */
async function writeTurns(ltm: LtmStore, session: string, from: number, count: number): Promise<void> {
  const words = ['running', 'runs', 'relational', 'relation', 'happiness', 'lanterns', 'lantern', 'zephyr'];
  const ref = sessionRef(session);
  const entries: StoredEntry[] = Array.from({ length: count }, (_, offset) => {
    const turn = from + offset;
    const accented = turn % 7 === 0 ? ' naïve café' : '';
    return {
      memoryId: turn + 1,
      address: `${ref.sessionKey}#${turn + 1}`,
      sessionId: ref.sessionId,
      sessionKey: ref.sessionKey,
      agentId: ref.agentId,
      kind: 'entry',
      role: turn % 2 ? 'assistant' : 'user',
      state: 'active',
      content: `turn ${turn} ${words[turn % words.length]} ${words[(turn * 3) % words.length]}${accented}`,
      relatedTo: null,
      tokens: 8,
      createdAtMs: turn,
      archivedAtMs: null,
      orderKey: turn + 1,
      rowId: undefined,
    };
  });
  await ltm.transaction((tx) => ltm.insertEntries(tx, entries));
}

/** Asked words: inflections of indexed ones, numbers, words no row holds, a word FTS5 folds from accents. */
const askedWords = [
  'run',
  'running',
  'relate',
  'relational',
  'happy',
  'lantern',
  'zephyrs',
  'turn',
  '17',
  '2024',
  'nowhere',
  'cafe',
  'naive',
];

/** The vocabulary's count of every asked word is the rows FTS5 finds for it. */
async function expectEveryAskedWordCounted(db: SqlDatabase, ltm: LtmStore): Promise<void> {
  for (const word of askedWords)
    expect([word, await ltm.vocabularyWordRows(word)]).toEqual([word, await matchingRows(db, word)]);
}

describe('the full-text index vocabulary [sqlite]', () => {
  const file = useMigratedSqliteFile('agentd-vocabulary-');

  const setup = async (options: { maxVocabularyTerms?: number } = {}) => {
    const db = file.db();
    const ltm: LtmStore = createLtmStore(db, { sqliteVec: false, ...options });
    return { db, ltm };
  };

  it("counts each asked word's rows as FTS5 does: stems, numbers and folded accents", async () => {
    const { db, ltm } = await setup();
    await writeTurns(ltm, 'main', 0, 300);
    await ltm.indexPending();
    await ltm.loadIndexVocabulary();
    await expectEveryAskedWordCounted(db, ltm);
    // Not one token of ASCII letters and digits: the vocabulary does not answer, the word is counted.
    expect(await ltm.vocabularyWordRows('naïve')).toBeUndefined();
  });

  it('counts the rows its read indexes first, and keeps the counts through the batch that indexed them', async () => {
    const { db, ltm } = await setup();
    await writeTurns(ltm, 'main', 0, 200);
    await ltm.indexPending();
    await writeTurns(ltm, 'main', 200, 40);
    // Not indexed yet: the read's own batch indexes them, before the mark the counts start from.
    await ltm.loadIndexVocabulary();
    expect(await ltm.vocabularyWordRows('lantern')).toBe(await matchingRows(db, 'lantern'));
    await writeTurns(ltm, 'ops', 240, 40);
    await ltm.indexPending();
    await expectEveryAskedWordCounted(db, ltm);
  });

  it('answers a load asked for while one is under way once that load has read', async () => {
    const { db, ltm } = await setup();
    await writeTurns(ltm, 'main', 0, 300);
    await ltm.indexPending();
    const first = ltm.loadIndexVocabulary();
    await ltm.loadIndexVocabulary();
    await expectEveryAskedWordCounted(db, ltm);
    await first;
  });

  it('keeps counting the rows of the batches it indexes after the load', async () => {
    const { db, ltm } = await setup();
    await writeTurns(ltm, 'main', 0, 200);
    await ltm.indexPending();
    await ltm.loadIndexVocabulary();
    for (let batch = 0; batch < 5; batch++) {
      await writeTurns(ltm, batch % 2 ? 'ops' : 'main', 200 + batch * 40, 40);
      await ltm.indexPending();
      await expectEveryAskedWordCounted(db, ltm);
    }
  });

  it('never counts too few rows after another connection writes and indexes, and drops the counts at its next batch', async () => {
    const { db, ltm } = await setup();
    await writeTurns(ltm, 'main', 0, 200);
    await ltm.indexPending();
    await ltm.loadIndexVocabulary();
    const other = createSqliteDatabase({ path: file.path() });
    try {
      const otherMemory = createHarness(other).memory;
      await otherMemory.appendBatch(
        sessionRef('elsewhere'),
        Array.from({ length: 30 }, (_, index) => ({
          role: 'user' as const,
          content: `zephyr gust ${index}`,
        })),
      );
      await createLtmStore(other, { sqliteVec: false }).indexPending();
    } finally {
      await other.close();
    }
    // This store sees another process's rows through its highest row id, read at most a second ago.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    for (const word of ['zephyr', 'gust', 'lantern']) {
      const rows = await ltm.vocabularyWordRows(word);
      expect(rows).toBeGreaterThanOrEqual(await matchingRows(db, word));
    }
    // The mark moved past what this store counted: its next batch finds it so and drops the counts.
    await writeTurns(ltm, 'main', 200, 4);
    await ltm.indexPending();
    expect(await ltm.vocabularyWordRows('zephyr')).toBeUndefined();
  });

  it('counts a deleted row still, so a count stays at or above the rows', async () => {
    const { db, ltm } = await setup();
    await writeTurns(ltm, 'main', 0, 120);
    await ltm.indexPending();
    await ltm.loadIndexVocabulary();
    const before = await ltm.vocabularyWordRows('lantern');
    await db.run("DELETE FROM memory_entries WHERE session_key = ? AND content LIKE '%lantern%'", [
      sessionRef('main').sessionKey,
    ]);
    // Rows of other turns still hold the word among the turns before them.
    expect(await matchingRows(db, 'lantern')).toBeLessThan(before! / 2);
    expect(await ltm.vocabularyWordRows('lantern')).toBe(before);
  });

  it('keeps no vocabulary above its most terms: words are counted by statement', async () => {
    const { ltm } = await setup({ maxVocabularyTerms: 50 });
    await writeTurns(ltm, 'main', 0, 120);
    await ltm.indexPending();
    await ltm.loadIndexVocabulary();
    expect(await ltm.vocabularyWordRows('lantern')).toBeUndefined();
  });

  it('drops the vocabulary when a batch brings it past its most terms: a message of 5,000 new words', async () => {
    const { db, ltm } = await setup({ maxVocabularyTerms: 1_000 });
    await writeTurns(ltm, 'main', 0, 120);
    await ltm.indexPending();
    await ltm.loadIndexVocabulary();
    expect(await ltm.vocabularyWordRows('lantern')).toBe(await matchingRows(db, 'lantern'));
    const words = Array.from({ length: 5_000 }, (_, index) => `w${index.toString(36)}q`).join(' ');
    await writeTurns(ltm, 'main', 120, 1);
    await db.run('UPDATE memory_entries SET content = ? WHERE id = (SELECT max(id) FROM memory_entries)', [
      words,
    ]);
    await ltm.indexPending();
    expect(await ltm.vocabularyWordRows('lantern')).toBeUndefined();
  });

  it('keeps no word longer than 64 characters: such words neither fill it nor are answered from it', async () => {
    const { db, ltm } = await setup({ maxVocabularyTerms: 1_000 });
    await writeTurns(ltm, 'main', 0, 120);
    await ltm.indexPending();
    await ltm.loadIndexVocabulary();
    // 2,000 distinct words of 5,000 characters: 10 MB held by the vocabulary before, and past its most terms.
    const long = (index: number) => `${index.toString(36).padStart(4, '0')}${'x'.repeat(4_996)}`;
    await writeTurns(ltm, 'main', 120, 1);
    await db.run('UPDATE memory_entries SET content = ? WHERE id = (SELECT max(id) FROM memory_entries)', [
      Array.from({ length: 2_000 }, (_, index) => long(index)).join(' '),
    ]);
    await ltm.indexPending();
    expect(await ltm.vocabularyWordRows('lantern')).toBe(await matchingRows(db, 'lantern'));
    // Counted by statement instead, and still found.
    expect(await ltm.vocabularyWordRows(long(7))).toBeUndefined();
    expect(await matchingRows(db, long(7))).toBe(1);
  });

  it('lets a search over its row budget plan without counting a word, and find what counting found', async () => {
    const { db, ltm } = await setup();
    for (let from = 0; from < 600; from += 200) await writeTurns(ltm, from % 400 ? 'ops' : 'main', from, 200);
    const weights = { before: 0.5 };
    const search = (store: LtmStore, words: string[]) =>
      store.fullText({ agentId: 'alpha', includeArchived: true }, words, 10, weights, 10, 100);
    const counted = createLtmStore(db, { sqliteVec: false });
    const queries = [
      ['zephyr', 'happiness'],
      ['relational', '17'],
      ['lanterns', 'nowhere', 'turn'],
      ['running'],
    ];
    const expected = [];
    for (const words of queries) expected.push((await search(counted, words)).map((row) => row.id));

    await ltm.indexPending();
    await ltm.loadIndexVocabulary();
    const get = vi.spyOn(db, 'get');
    const found = [];
    for (const words of queries) found.push((await search(ltm, words)).map((row) => row.id));
    const counts = get.mock.calls.filter(([sql]) =>
      sql.includes('count(*) AS n FROM (SELECT 1 FROM memory_fts'),
    );
    get.mockRestore();
    expect(counts).toEqual([]);
    expect(found).toEqual(expected);
  });

  it("is read in the background after a memory service's first search over its budget, and then spares its counts", async () => {
    const db = file.db();
    const { memory } = createHarness(db, {
      config: { maxActiveEntries: 16, recall: { maxScoredRows: 100 } },
    });
    const words = ['lantern', 'zephyr', 'harbour', 'quartz', 'meadow', 'violet', 'copper', 'signal'];
    for (let from = 0; from < 600; from += 200)
      await memory.appendBatch(
        sessionRef('main'),
        Array.from({ length: 200 }, (_, offset) => ({
          role: offset % 2 ? ('assistant' as const) : ('user' as const),
          content: `note ${from + offset} ${words[(from + offset) % words.length]}`,
        })),
      );
    const get = vi.spyOn(db, 'get');
    const countsOf = async (query: string) => {
      get.mockClear();
      await memory.search({ agentId: 'alpha', query, limit: 5 });
      return get.mock.calls.filter(([sql]) => sql.includes('count(*) AS n FROM (SELECT 1 FROM memory_fts'))
        .length;
    };
    // The first search counts its words; the merge and the read of the vocabulary follow it.
    expect(await countsOf('lantern zephyr')).toBe(2);
    // Each asked word is in the index and was never counted: a note's number.
    let asked = 100;
    await vi.waitFor(async () => expect(await countsOf(String(asked++))).toBe(0), {
      timeout: 5_000,
      interval: 20,
    });
    expect(await countsOf(`${asked} ${asked + 1} harbour`)).toBe(0);
    get.mockRestore();
  });
});

describe("the index vocabulary's reader and the database's life [sqlite]", () => {
  /** A migrated file whose index holds about 12,000 terms: a read of several steps. */
  const fileWithManyTerms = async () => {
    const file = temporarySqliteFile('agentd-vocabulary-life-');
    const db = createSqliteDatabase({ path: file.path });
    await migrate(db);
    const ltm = createLtmStore(db, { sqliteVec: false });
    for (let from = 0; from < 12; from++) {
      await writeTurns(ltm, 'main', from, 1);
      const words = Array.from({ length: 1_000 }, (_, index) => `w${from}x${index.toString(36)}q`).join(' ');
      await db.run('UPDATE memory_entries SET content = ? WHERE id = (SELECT max(id) FROM memory_entries)', [
        words,
      ]);
    }
    await ltm.indexPending();
    await db.close();
    return file;
  };
  /** What is left in the database's folder once every connection is closed: the file alone, no WAL files. */
  const filesBeside = (path: string) => readdirSync(dirname(path)).sort();

  it('stops a read its signal aborts midway and settles only once its connection is gone', async () => {
    const file = await fileWithManyTerms();
    // The writer's connection, last to close once the reader's is gone, removes the WAL files: a read-only
    // connection left last would leave them.
    const writer = createSqliteDatabase({ path: file.path });
    try {
      await writer.get('SELECT count(*) FROM memory_entries');
      const ending = new AbortController();
      let steps = 0;
      const read = await readVocabulary(
        file.path,
        () => {
          steps++;
          ending.abort();
          return true;
        },
        { stepTerms: 500, signal: ending.signal },
      );
      expect([read, steps]).toEqual([false, 1]);
      await writer.close();
      expect(filesBeside(file.path)).toEqual(['test.db']);
      await sleep(100);
      expect(filesBeside(file.path)).toEqual(['test.db']);
    } finally {
      await writer.close();
      file.remove();
    }
  });

  it('ends when the database closes, whenever it closes, and leaves no file beside it', async () => {
    const file = await fileWithManyTerms();
    try {
      for (const closeAfterMs of [0, 1, 2, 5, 10, 20, 40, 80]) {
        const db = createSqliteDatabase({ path: file.path });
        const ltm = createLtmStore(db, { sqliteVec: false });
        const loading = ltm.loadIndexVocabulary();
        await sleep(closeAfterMs);
        await db.close();
        expect([closeAfterMs, filesBeside(file.path)]).toEqual([closeAfterMs, ['test.db']]);
        await loading;
        // Nothing reopens the file afterwards: no read is started once the database has closed.
        await ltm.loadIndexVocabulary();
        await sleep(20);
        expect([closeAfterMs, filesBeside(file.path)]).toEqual([closeAfterMs, ['test.db']]);
      }
    } finally {
      file.remove();
    }
  });
});
