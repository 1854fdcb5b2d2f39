import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { forEachIndexTerm, porterStem } from '../../src/memory/porter.js';

/** Every term SQLite's FTS5 `porter unicode61` tokenizer makes of each text (one row a text, `doc` from 1). */
function sqliteTerms(texts: ReadonlyArray<string>): Array<{ term: string; doc: number }> {
  const db = new Database(':memory:');
  try {
    db.exec("CREATE VIRTUAL TABLE texts USING fts5 (text, tokenize = 'porter unicode61')");
    db.exec("CREATE VIRTUAL TABLE text_terms USING fts5vocab (texts, 'instance')");
    const insert = db.prepare('INSERT INTO texts (rowid, text) VALUES (?, ?)');
    db.transaction(() => {
      texts.forEach((text, index) => {
        insert.run(index + 1, text);
      });
    })();
    return db.prepare('SELECT term, doc FROM text_terms').all() as Array<{ term: string; doc: number }>;
  } finally {
    db.close();
  }
}

/** Each word's stem as SQLite's FTS5 `porter unicode61` tokenizer indexes it. */
function sqliteStems(words: ReadonlyArray<string>): string[] {
  const stems: string[] = new Array(words.length);
  for (const { term, doc } of sqliteTerms(words)) stems[doc - 1] = term;
  return stems;
}

/** Deterministic pseudo-random numbers, so a failure names the same words every run. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 4294967296;
  };
}

/** The lower-case ASCII words of this project's own prose and code: real English and real identifiers. */
function projectWords(): string[] {
  const words = new Set<string>();
  const root = join(import.meta.dirname, '..', '..');
  for (const dir of ['docs', 'src/memory', 'src/engage', 'src/gateway'])
    for (const name of readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })) {
      if (!/\.(md|ts)$/.test(name)) continue;
      for (const word of readFileSync(join(root, dir, name), 'utf8')
        .toLowerCase()
        .match(/[a-z0-9]+/g) ?? [])
        words.add(word);
    }
  return [...words];
}

/** Every suffix the rules know, and endings that reach their edge cases (`y`, double letters, `e`). */
const suffixes = (
  'ational tional enci anci izer logi bli alli entli eli ousli ization ation ator alism iveness fulness ousness ' +
  'aliti iviti biliti icate ative alize iciti ical ful ness al ance ence er ic able ible ant ement ment ent ion ' +
  'sion tion ou ism ate iti ous ive ize s es ies sses ss ed eed ing ating bling izing ying y ly e ll ble at bl iz'
).split(' ');

/** Random stems of 1–7 letters (consonant-heavy, with y and digits) followed by 0–2 suffixes. */
function syntheticWords(count: number): string[] {
  const next = random(7);
  const letters = 'bcdfghjklmnpqrstvwxzaeiouyyss0123';
  const words: string[] = [];
  for (let index = 0; index < count; index++) {
    let word = '';
    const length = 1 + Math.floor(next() * 7);
    for (let at = 0; at < length; at++) word += letters[Math.floor(next() * letters.length)];
    const suffixCount = Math.floor(next() * 3);
    for (let at = 0; at < suffixCount; at++) word += suffixes[Math.floor(next() * suffixes.length)];
    words.push(word);
  }
  return words;
}

describe('the FTS5 porter stem in JavaScript', () => {
  it("gives SQLite's own stem for every word of the project's prose and code", () => {
    const words = projectWords();
    expect(words.length).toBeGreaterThan(3_000);
    const expected = sqliteStems(words);
    const differing = words.filter((word, index) => porterStem(word) !== expected[index]);
    expect(differing).toEqual([]);
  });

  it("gives SQLite's own stem for 60,000 synthetic words that reach every rule", () => {
    const words = syntheticWords(60_000);
    const expected = sqliteStems(words);
    const differing = words
      .map((word, index) => ({ word, sqlite: expected[index], ours: porterStem(word) }))
      .filter(({ sqlite, ours }) => sqlite !== ours);
    expect(differing.slice(0, 20)).toEqual([]);
  });

  it("gives SQLite's own stem for every stem of one or two letters with each suffix", () => {
    const letters = 'abcdefghijklmnopqrstuvwxyz0';
    const stems = [...letters].flatMap((first) => [first, ...[...letters].map((second) => first + second)]);
    const words = stems.flatMap((stem) => suffixes.map((suffix) => stem + suffix));
    const expected = sqliteStems(words);
    const differing = words.filter((word, index) => porterStem(word) !== expected[index]);
    expect(differing.slice(0, 20)).toEqual([]);
  });

  it('leaves words under 3 and over 64 letters as they are', () => {
    const long = `${'relational'.repeat(6)}ational`;
    expect(porterStem('is')).toBe('is');
    expect(porterStem(long)).toBe(long);
    expect(sqliteStems(['is', long])).toEqual(['is', long]);
  });
});

/** Each text's ASCII terms as FTS5's `porter unicode61` tokenizer indexes it. */
function sqliteAsciiTerms(texts: ReadonlyArray<string>): Array<Set<string>> {
  const terms = texts.map(() => new Set<string>());
  for (const { term, doc } of sqliteTerms(texts)) if (/^[a-z0-9]+$/.test(term)) terms[doc - 1]!.add(term);
  return terms;
}

/** The terms `forEachIndexTerm` names, failing if it names one twice. */
const termsOf = (text: string): Set<string> => {
  const terms = new Set<string>();
  forEachIndexTerm(text, porterStem, (term) => {
    if (terms.has(term)) throw new Error(`${term} named twice for ${JSON.stringify(text)}`);
    terms.add(term);
  });
  return terms;
};

describe("FTS5's porter unicode61 terms in JavaScript", () => {
  it('names every ASCII term FTS5 makes around every code point below U+30000', () => {
    const texts: string[] = [];
    for (let codePoint = 0x80; codePoint < 0x30000; codePoint++) {
      if (codePoint >= 0xd800 && codePoint <= 0xdfff) continue;
      const character = String.fromCodePoint(codePoint);
      texts.push(`q${character}q ${character}ab RUNS${character}ing`);
    }
    const expected = sqliteAsciiTerms(texts);
    const missing = texts.flatMap((text, index) => {
      const ours = termsOf(text);
      return [...expected[index]!].filter((term) => !ours.has(term)).map((term) => ({ text, term }));
    });
    expect(missing.slice(0, 10)).toEqual([]);
  });

  it('names exactly the terms FTS5 makes of ASCII text, accented Latin and combining diacritics', () => {
    const next = random(11);
    const pieces = [
      'Running',
      'relational',
      'happiness',
      "don't",
      'e-mail',
      'naïve',
      'CAFÉ',
      'cafe\u0301s',
      'x\u0301y',
      'İstanbul',
      'ſtreet',
      '2024',
      'v1.2',
      'snake_case',
      'camelCase',
      'a\u200db',
      '—',
      '\n',
      '\t',
      '...',
    ];
    const texts = Array.from({ length: 3_000 }, () =>
      Array.from(
        { length: 1 + Math.floor(next() * 12) },
        () => pieces[Math.floor(next() * pieces.length)],
      ).join(next() < 0.5 ? ' ' : ''),
    );
    const expected = sqliteAsciiTerms(texts);
    const differing = texts
      .map((text, index) => ({ text, sqlite: [...expected[index]!].sort(), ours: [...termsOf(text)].sort() }))
      .filter(({ sqlite, ours }) => sqlite.join(' ') !== ours.join(' '));
    expect(differing.slice(0, 10)).toEqual([]);
  });
});
