/**
 * Text helpers shared by the RAM model, full-text queries and embeddings: token estimates, query
 * tokenization and a small English stopword list. Keyword search drops stopwords because an OR query over
 * "the" or "what" matches nearly every row: that costs latency and adds nothing to the BM25 ranking.
 */
import { estimateTokens as estimateModelTokens } from '../model/index.js';

/** What the model layer's estimate adds for a message around its text. */
const messageOverheadTokens = estimateModelTokens([{ role: 'user', content: '' }]);

/**
 * Tokens of a text as one message of a conversation: the model layer's one estimate, overhead included. The
 * estimate of a message is its text's plus the overhead, so no message array is built for it (the array
 * form is also what every other caller passes, where the message loop runs megamorphic).
 */
export function estimateTokens(text: string): number {
  return estimateModelTokens(text) + messageOverheadTokens;
}

const stopwords = new Set(
  (
    'a about above after again against all am an and any are as at be because been before being below between both ' +
    'but by can could did do does doing down during each few for from further had has have having he her here hers ' +
    'herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on ' +
    'once only or other our ours ourselves out over own same she should so some such than that the their theirs them ' +
    'themselves then there these they this those through to too under until up very was we were what when where which ' +
    'while who whom why will with would you your yours yourself yourselves'
  ).split(' '),
);

/** Lower-cased word tokens (letters and digits, any script). */
export function wordTokens(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** Distinct non-stopword tokens of a text, in first-seen order, capped so a pasted essay stays cheap. */
export function contentTerms(text: string, maxTerms = 32): string[] {
  const seen = new Set<string>();
  for (const token of wordTokens(text)) {
    if (stopwords.has(token) || seen.has(token)) continue;
    seen.add(token);
    if (seen.size >= maxTerms) break;
  }
  return [...seen];
}

/** A search's terms: its content terms, or, for a query made only of stopwords, those words. */
export function queryTerms(text: string, maxTerms = 32): string[] {
  const terms = contentTerms(text, maxTerms);
  if (terms.length > 0) return terms;
  // Someone who searches for stopwords alone still deserves an answer.
  const seen = new Set<string>();
  for (const token of wordTokens(text)) {
    seen.add(token);
    if (seen.size >= maxTerms) break;
  }
  return [...seen];
}

/** FTS5 MATCH expression: any of the terms (bm25 ranks documents matching more and rarer terms higher). */
export function ftsAnyOf(terms: ReadonlyArray<string>): string {
  return terms.map((term) => `"${term}"`).join(' OR ');
}

/** FTS5 MATCH expression: the words as one phrase. */
export function ftsPhrase(text: string): string {
  const tokens = wordTokens(text);
  return tokens.length === 0 ? '' : `"${tokens.join(' ')}"`;
}

/** Postgres tsquery text for `to_tsquery('english', …)`: any of the terms. */
export function tsqueryAnyOf(terms: ReadonlyArray<string>): string {
  return terms.join(' | ');
}

/** Postgres tsquery text: the words as one phrase (`<->` adjacency). */
export function tsqueryPhrase(text: string): string {
  return wordTokens(text).join(' <-> ');
}

/** Cuts text to `maxChars`, on a word boundary where one is near, with an ellipsis. */
export function truncateText(text: string, maxChars: number): { text: string; truncated: boolean } {
  if (text.length <= maxChars) return { text, truncated: false };
  const cut = text.slice(0, maxChars);
  const space = cut.lastIndexOf(' ');
  const body = space > maxChars * 0.6 ? cut.slice(0, space) : cut;
  return { text: `${body.trimEnd()}…`, truncated: true };
}
