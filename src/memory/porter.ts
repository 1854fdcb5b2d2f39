/**
 * The stem SQLite's FTS5 `porter` tokenizer gives a lower-case ASCII word: M. F. Porter's 1980 algorithm as
 * FTS5 applies it, so the full-text index's own terms can be looked up for a query word without a statement
 * (the index vocabulary in ltm-store.ts). FTS5's variant: words under 3 or over 64 characters are left as
 * they are; in a group of rules the first suffix that matches decides, whether or not its condition holds; a
 * suffix must leave at least one letter (`at`, `bl` and `iz` of step 1b two); step 2 also has `logi` and `bli`; in the `*v*` test a `y` is a
 * vowel anywhere but first. test/memory/porter.test.ts checks it against SQLite's own tokenizer word by word.
 */

const minStemmedLength = 3;
const maxStemmedLength = 64;

const isPlainVowel = (code: number): boolean =>
  code === 97 || code === 101 || code === 105 || code === 111 || code === 117;

/**
 * Whether each of the first `length` letters is a consonant: not a plain vowel, and a `y` only after a
 * vowel or first (Porter's definition).
 */
function consonants(word: string, length: number): boolean[] {
  const flags: boolean[] = new Array(length);
  let previousConsonant = false;
  for (let index = 0; index < length; index++) {
    const code = word.charCodeAt(index);
    const vowel: boolean = isPlainVowel(code) || (code === 121 && previousConsonant);
    flags[index] = !vowel;
    previousConsonant = !vowel;
  }
  return flags;
}

/**
 * Porter's measure m of the first `length` letters (the number of vowel-consonant sequences), counted no
 * further than 2: the rules only ask for m > 0, m = 1 and m > 1.
 */
function measure(word: string, length: number): number {
  const flags = consonants(word, length);
  let count = 0;
  let index = 0;
  while (index < length && flags[index]) index++;
  while (index < length && count < 2) {
    while (index < length && !flags[index]) index++;
    if (index >= length) break;
    count++;
    while (index < length && flags[index]) index++;
  }
  return count;
}

/** `*v*`: a vowel among the first `length` letters, a `y` counting as one anywhere but first. */
function hasVowel(word: string, length: number): boolean {
  for (let index = 0; index < length; index++) {
    const code = word.charCodeAt(index);
    if (isPlainVowel(code) || (code === 121 && index > 0)) return true;
  }
  return false;
}

/** `*o`: the first `length` letters end consonant-vowel-consonant, the last not w, x or y. */
function endsCvc(word: string, length: number): boolean {
  if (length < 3) return false;
  const last = word.charCodeAt(length - 1);
  if (last === 119 || last === 120 || last === 121) return false;
  const flags = consonants(word, length);
  return flags[length - 3]! && !flags[length - 2]! && flags[length - 1]!;
}

type Condition = (word: string, stemLength: number) => boolean;
const measureAbove0: Condition = (word, length) => measure(word, length) > 0;
const measureAbove1: Condition = (word, length) => measure(word, length) > 1;
const measureAbove1EndingSOrT: Condition = (word, length) => {
  const last = word.charCodeAt(length - 1);
  return (last === 115 || last === 116) && measure(word, length) > 1;
};

/** A step's rules as [suffix, replacement, condition], in the order they are tried. */
type Rule = readonly [string, string, Condition];

const step2: Rule[] = [
  ['ational', 'ate', measureAbove0],
  ['tional', 'tion', measureAbove0],
  ['enci', 'ence', measureAbove0],
  ['anci', 'ance', measureAbove0],
  ['izer', 'ize', measureAbove0],
  ['logi', 'log', measureAbove0],
  ['bli', 'ble', measureAbove0],
  ['alli', 'al', measureAbove0],
  ['entli', 'ent', measureAbove0],
  ['eli', 'e', measureAbove0],
  ['ousli', 'ous', measureAbove0],
  ['ization', 'ize', measureAbove0],
  ['ation', 'ate', measureAbove0],
  ['ator', 'ate', measureAbove0],
  ['alism', 'al', measureAbove0],
  ['iveness', 'ive', measureAbove0],
  ['fulness', 'ful', measureAbove0],
  ['ousness', 'ous', measureAbove0],
  ['aliti', 'al', measureAbove0],
  ['iviti', 'ive', measureAbove0],
  ['biliti', 'ble', measureAbove0],
];
const step3: Rule[] = [
  ['icate', 'ic', measureAbove0],
  ['ative', '', measureAbove0],
  ['alize', 'al', measureAbove0],
  ['iciti', 'ic', measureAbove0],
  ['ical', 'ic', measureAbove0],
  ['ful', '', measureAbove0],
  ['ness', '', measureAbove0],
];
const step4: Rule[] = [
  ['al', '', measureAbove1],
  ['ance', '', measureAbove1],
  ['ence', '', measureAbove1],
  ['er', '', measureAbove1],
  ['ic', '', measureAbove1],
  ['able', '', measureAbove1],
  ['ible', '', measureAbove1],
  ['ant', '', measureAbove1],
  ['ement', '', measureAbove1],
  ['ment', '', measureAbove1],
  ['ent', '', measureAbove1],
  ['ion', '', measureAbove1EndingSOrT],
  ['ou', '', measureAbove1],
  ['ism', '', measureAbove1],
  ['ate', '', measureAbove1],
  ['iti', '', measureAbove1],
  ['ous', '', measureAbove1],
  ['ive', '', measureAbove1],
  ['ize', '', measureAbove1],
];

/**
 * Applies the first rule whose suffix `word` ends with and leaves a letter before; its condition decides
 * whether it changes anything, and no later rule is tried. Two suffixes of a step that both match a word
 * share their last two letters, the letters FTS5 groups a step's rules by, so the first in this order is
 * the first of its group.
 */
function applyFirst(word: string, rules: ReadonlyArray<Rule>): string {
  for (const [suffix, replacement, condition] of rules) {
    if (word.length <= suffix.length || !word.endsWith(suffix)) continue;
    const stemLength = word.length - suffix.length;
    return condition(word, stemLength) ? word.slice(0, stemLength) + replacement : word;
  }
  return word;
}

function step1a(word: string): string {
  if (!word.endsWith('s')) return word;
  if (word.endsWith('es')) {
    if ((word.length > 4 && word.endsWith('sses')) || (word.length > 3 && word.endsWith('ies')))
      return word.slice(0, -2);
    return word.slice(0, -1);
  }
  return word.endsWith('ss') ? word : word.slice(0, -1);
}

function step1b(word: string): string {
  let stem: string;
  if (word.length > 3 && word.endsWith('eed'))
    return measure(word, word.length - 3) > 0 ? word.slice(0, -1) : word;
  if (word.length > 2 && word.endsWith('ed') && hasVowel(word, word.length - 2)) stem = word.slice(0, -2);
  else if (word.length > 3 && word.endsWith('ing') && hasVowel(word, word.length - 3))
    stem = word.slice(0, -3);
  else return word;
  if (stem.length > 2 && (stem.endsWith('at') || stem.endsWith('bl') || stem.endsWith('iz')))
    return `${stem}e`;
  const last = stem.charCodeAt(stem.length - 1);
  if (
    stem.length >= 2 &&
    !isPlainVowel(last) &&
    last !== 108 &&
    last !== 115 &&
    last !== 122 &&
    last === stem.charCodeAt(stem.length - 2)
  )
    return stem.slice(0, -1);
  if (measure(stem, stem.length) === 1 && endsCvc(stem, stem.length)) return `${stem}e`;
  return stem;
}

/** The FTS5 `porter` stem of a lower-case ASCII token (letters and digits). */
export function porterStem(token: string): string {
  if (token.length < minStemmedLength || token.length > maxStemmedLength) return token;
  let word = step1b(step1a(token));
  if (word.endsWith('y') && hasVowel(word, word.length - 1)) word = `${word.slice(0, -1)}i`;
  word = applyFirst(applyFirst(applyFirst(word, step2), step3), step4);
  if (word.endsWith('e')) {
    const stemLength = word.length - 1;
    const m = measure(word, stemLength);
    if (m > 1 || (m === 1 && !endsCvc(word, stemLength))) word = word.slice(0, stemLength);
  }
  if (word.length > 1 && word.endsWith('ll') && measure(word, word.length - 1) > 1) word = word.slice(0, -1);
  return word;
}

/**
 * Token characters of FTS5's `unicode61` tokenizer, as far as ASCII terms go: letters, digits, private-use
 * characters, and the 25 combining diacritics it drops from a token (`x\u0301y` is `xy`). Other combining
 * marks either end a token there or stay in it, which leaves no ASCII term; this splits at them, at worst
 * naming an ASCII term FTS5 does not have, which only makes a count too high.
 */
const indexToken =
  // biome-ignore lint/suspicious/noMisleadingCharacterClass: the marks are listed alone, as characters of a token, not as parts of the letters before them.
  /[\p{L}\p{N}\p{Co}\u0300-\u0304\u0306-\u030c\u030f\u0311\u031b\u0323-\u0328\u032d\u032e\u0330\u0331]+/gu;
const plainToken = /^[a-z0-9]+$/;

/**
 * Whether `word` is one FTS5 token as it is, lower-case ASCII letters and digits, whose index term is its
 * `porterStem`.
 */
export const isPlainToken = (word: string): boolean => plainToken.test(word);
const combiningMarks = /\p{M}/gu;
const asciiRuns = /[a-z0-9]+/g;

/**
 * A token as `unicode61` folds it, as far as ASCII goes: lower case, diacritics removed (canonical
 * decomposition, marks dropped, the long s as s).
 */
function foldToken(token: string): string {
  if (plainToken.test(token)) return token;
  return token.toLowerCase().normalize('NFD').replace(combiningMarks, '').replaceAll('ſ', 's');
}

/**
 * Each term FTS5's `porter unicode61` tokenizer makes of `text` that is ASCII letters and digits, once, and
 * perhaps a few it does not make, passed to `onTerm`; `stem` gives a folded token's stem (`porterStem`, or a
 * memo of it). A token left with other characters once folded is no such term, but each run of ASCII
 * letters and digits in it is named too: SQLite's Unicode tables are older than V8's, and a character that is
 * a letter here may end a token there (U+19B0, a vowel sign of New Tai Lue, is one). Checked against FTS5 for
 * every code point below U+30000 (test/memory/porter.test.ts): no term of FTS5's is left out.
 */
export function forEachIndexTerm(
  text: string,
  stem: (token: string) => string,
  onTerm: (term: string) => void,
): void {
  const seen = new Set<string>();
  const name = (token: string) => {
    const term = stem(token);
    if (seen.has(term)) return;
    seen.add(term);
    onTerm(term);
  };
  for (const token of text.toLowerCase().match(indexToken) ?? []) {
    const folded = foldToken(token);
    if (plainToken.test(folded)) name(folded);
    else for (const part of folded.match(asciiRuns) ?? []) name(part);
  }
}
