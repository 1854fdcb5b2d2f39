import type { RecallLine, StoredEntry } from '../ltm-store.js';
import { estimateTokens, truncateText } from '../text.js';
import type { MemoryContext } from './context.js';

/** One line of automatic recall's prompt block, as written, and its estimated tokens. */
export interface PromptLine {
  text: string;
  tokens: number;
}

/** Whitespace other than a single space: what a prompt line collapses into one space. */
const unevenSpace = /[^\S ]| {2}/;

/** `YYYY-MM-DD` (UTC) of each day seen, so that the lines of one day share a string instead of a Date each. */
const utcDates = new Map<number, string>();
const dayMs = 86_400_000;

function utcDate(timeMs: number): string {
  const day = Math.floor(timeMs / dayMs);
  let date = utcDates.get(day);
  if (date === undefined) {
    if (utcDates.size >= 4_096) utcDates.clear();
    date = new Date(day * dayMs).toISOString().slice(0, 10);
    utcDates.set(day, date);
  }
  return date;
}

/**
 * A memory as one line of the prompt block: its address, day and speaker, its text on one line and cut. The
 * line is joined, not concatenated: a template literal leaves a chain of nine cons strings (and the content
 * it ends with), which the line cache then keeps in the old generation for as long as the line; a join copies
 * the pieces into one flat string, which also holds nothing of a longer content it was cut from.
 */
export function promptLineOf(line: RecallLine, previewChars: number): PromptLine {
  // Most contents are one line with single spaces: only the others are rewritten (a regex replace copies
  // the whole text, about 1 µs a line).
  const flat = unevenSpace.test(line.content) ? line.content.replace(/\s+/g, ' ') : line.content;
  const text = [
    '- [',
    line.sessionKey,
    '#',
    String(line.memoryId),
    ', ',
    utcDate(line.createdAtMs),
    '] ',
    line.speaker,
    ': ',
    truncateText(flat.trim(), previewChars).text,
  ].join('');
  return { text, tokens: estimateTokens(text) };
}

/**
 * A stored entry as the newest-matches path lists it: none of it ever changes once the entry is committed.
 * Its prompt line is made when it is first listed (most committed entries never are), from the content kept
 * until then; a long content's line is made at once, so that no long content is held.
 */
export interface CachedPromptLine {
  readonly agentId: string;
  readonly sessionKey: string;
  readonly memoryId: number;
  readonly createdAtMs: number;
  readonly speaker: string;
  content: string;
  line: PromptLine | undefined;
}

/** The prompt line of a cached entry, made on first use (through the cache's `lineOf` once it is cached). */
function linedOf(cached: CachedPromptLine, previewChars: number): PromptLine {
  if (cached.line === undefined) {
    cached.line = promptLineOf({ ...cached, storedInContext: false }, previewChars);
    cached.content = '';
  }
  return cached.line;
}

/**
 * Prompt lines of stored entries by row id, for automatic recall's newest-matches path (recall.ts), which
 * lists the newest matches of a term: mostly rows committed recently, so the entries of every commit are kept
 * as it is made, and rows read for a search are kept as well. A row's agent, key, number, text, time and
 * speaker never change once it is committed, and a committed row id is never reused (AUTOINCREMENT), so a
 * line stays true while its row exists; a deleted row is no longer named by the full-text lookup that names
 * the row ids. A row's context state does change, and is not kept. At most `maxCachedLines` entries, each
 * holding at most `2 * recall.previewChars` characters of content or its line (about 2.5 MB at the default
 * 280, less where contents are shorter and shared with the RAM contexts), the oldest dropped first.
 */
export interface PromptLineCache {
  get(rowId: number): CachedPromptLine | undefined;
  set(rowId: number, line: CachedPromptLine): void;
  readonly size: number;
  /** Characters held (content or line; two bytes each at most), counted as entries come, go and are lined. */
  readonly chars: number;
  /** The prompt line of an entry read from the cache (`rowId`'s), made on first use. */
  lineOf(rowId: number, cached: CachedPromptLine, previewChars: number): PromptLine;
}

export const maxCachedLines = 4_096;

/**
 * First in, first out: entries come in as they are committed or read, and a hit does not move one (moving
 * it was two Map operations for every row id looked at, most of them never listed). An old entry that is
 * still asked for is read again once dropped, and comes in again.
 */
function createPromptLineCache(): PromptLineCache {
  const lines = new Map<number, CachedPromptLine>();
  // Row ids in the order they came in. The oldest is found here, not as the Map's first key: a Map that
  // drops its first key on every insert keeps the deleted slots until it rehashes, and finding the first
  // live key walked over them (0.8 µs an insert at 4,096 entries against 0.1). A row id set again is in
  // here twice; its older place only drops it a little early.
  let order: number[] = [];
  let oldest = 0;
  // A running count: memory.status() reports it, and the chat path asks status() on every message.
  let chars = 0;
  const charsOf = (cached: CachedPromptLine) => cached.line?.text.length ?? cached.content.length;
  const drop = (rowId: number) => {
    const held = lines.get(rowId);
    if (held === undefined) return;
    chars -= charsOf(held);
    lines.delete(rowId);
  };
  return {
    get: (rowId) => lines.get(rowId),
    set(rowId, line) {
      drop(rowId);
      while (lines.size >= maxCachedLines && oldest < order.length) drop(order[oldest++]!);
      if (oldest > maxCachedLines && oldest * 2 > order.length) {
        order = order.slice(oldest);
        oldest = 0;
      }
      lines.set(rowId, line);
      order.push(rowId);
      chars += charsOf(line);
    },
    get size() {
      return lines.size;
    },
    get chars() {
      return chars;
    },
    lineOf(rowId, cached, previewChars) {
      if (cached.line !== undefined) return cached.line;
      const before = cached.content.length;
      const line = linedOf(cached, previewChars);
      // An entry dropped since it was read is no longer counted.
      if (lines.get(rowId) === cached) chars += line.text.length - before;
      return line;
    },
  };
}

const caches = new WeakMap<MemoryContext, PromptLineCache>();

export function promptLineCache(ctx: MemoryContext): PromptLineCache {
  let cache = caches.get(ctx);
  if (cache === undefined) {
    cache = createPromptLineCache();
    caches.set(ctx, cache);
  }
  return cache;
}

/** Lines and characters held by automatic recall's line cache (`status().promptLineCache`). */
export function promptLineCacheSize(ctx: MemoryContext): { lines: number; chars: number } {
  const cache = caches.get(ctx);
  return { lines: cache?.size ?? 0, chars: cache?.chars ?? 0 };
}

/** An entry to cache. A long content's line is made now, so that the cache does not hold the long content. */
export function cachedPromptLine(
  entry: Omit<RecallLine, 'storedInContext'> & { agentId: string },
  previewChars: number,
): CachedPromptLine {
  const cached: CachedPromptLine = {
    agentId: entry.agentId,
    sessionKey: entry.sessionKey,
    memoryId: entry.memoryId,
    createdAtMs: entry.createdAtMs,
    speaker: entry.speaker,
    content: entry.content,
    line: undefined,
  };
  if (entry.content.length > 2 * previewChars) linedOf(cached, previewChars);
  return cached;
}

/**
 * Keeps the entries of a commit just made (tombstones are never recalled) for the newest-matches path. About
 * 0.2 µs an entry: no line is made here.
 */
export function rememberCommitted(ctx: MemoryContext, entries: ReadonlyArray<StoredEntry>): void {
  const cache = promptLineCache(ctx);
  const previewChars = ctx.config.recall.previewChars;
  for (const entry of entries) {
    if (entry.rowId === undefined || entry.state === 'tombstone') continue;
    cache.set(
      entry.rowId,
      cachedPromptLine(
        {
          agentId: entry.agentId,
          sessionKey: entry.sessionKey,
          memoryId: entry.memoryId,
          content: entry.content,
          createdAtMs: entry.createdAtMs,
          speaker: entry.kind === 'summary' ? 'summary' : entry.role,
        },
        previewChars,
      ),
    );
  }
}
