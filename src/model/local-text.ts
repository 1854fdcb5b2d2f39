/** Small, deterministic text helpers for the local model: words, keywords, sentences, clauses. */

const stopwords = new Set(
  (
    'a an the and or but if then else of to in on at by for with from into onto about as is are was were be been ' +
    'being am do does did doing have has had having i me my mine we us our you your yours he him his she her it ' +
    'its they them their this that these those there here what which who whom whose when where why how can could ' +
    'should would will shall may might must not no yes so than too very just also please tell know remind recall ' +
    'any some all each me myself please hi hello hey ok okay'
  ).split(' '),
);

export function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** Crude suffix stripping so "plans", "planned" and "planning" meet at "plan". */
export function stem(word: string): string {
  if (word.length > 5 && word.endsWith('ing')) return trimDouble(word.slice(0, -3));
  if (word.length > 4 && word.endsWith('ed')) return trimDouble(word.slice(0, -2));
  if (word.length > 4 && word.endsWith('es') && /(?:ss|sh|ch|x)es$/.test(word)) return word.slice(0, -2);
  if (word.length > 3 && word.endsWith('s') && !word.endsWith('ss')) return word.slice(0, -1);
  return word;
}

function trimDouble(word: string): string {
  return /([b-df-hj-np-tv-z])\1$/.test(word) ? word.slice(0, -1) : word;
}

/** Stemmed words that carry meaning. */
export function keywords(text: string): string[] {
  return words(text)
    .filter((word) => !stopwords.has(word))
    .map(stem);
}

export function splitSentences(text: string): string[] {
  return text
    .split(/(?<=[.!?])\s+|\n+/)
    .map((sentence) => sentence.trim())
    .filter((sentence) => sentence.length > 0);
}

/** `- item`, `* item`, `1. item`, `2) item` → `item`. */
export function stripBullet(line: string): string {
  return line.replace(/^\s*(?:[-*•+]|\d+[.)]|[a-z][.)](?=\s))\s*/i, '').trim();
}

export function firstWords(text: string, maxChars: number): string {
  const clean = text.replace(/\s+/g, ' ').trim();
  if (clean.length <= maxChars) return clean;
  const cut = clean.slice(0, maxChars);
  const space = cut.lastIndexOf(' ');
  return `${(space > maxChars / 2 ? cut.slice(0, space) : cut).trimEnd()}…`;
}

/** Pieces of `text` of a few words each, for streaming; joined they give back `text` exactly. */
export function chunkText(text: string, wordsPerChunk = 4): string[] {
  const pieces = text.match(/\S+\s*|\s+/g) ?? [];
  const chunks: string[] = [];
  for (let index = 0; index < pieces.length; index += wordsPerChunk) {
    chunks.push(pieces.slice(index, index + wordsPerChunk).join(''));
  }
  return chunks;
}
