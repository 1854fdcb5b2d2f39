import { ErrorCodes, UserInputError } from '../../util/index.js';
import { parseMemoryAddress, toMemoryItem } from '../items.js';
import {
  type EntryFilter,
  type RankedLine,
  type RecallLine,
  rowToEntry,
  type StoredEntry,
} from '../ltm-store.js';
import { fuseRankings, rrfRankConstant, type ScoredTurn, spreadToNeighbours } from '../ranking.js';
import { contentTerms, estimateTokens, queryTerms, wordTokens } from '../text.js';
import type {
  HistoryEntry,
  HistoryOptions,
  MemoryEntry,
  MemoryItem,
  QueryOptions,
  RecallOptions,
  SearchHit,
  SearchOptions,
} from '../types.js';
import type { MemoryContext, RamSession } from './context.js';
import {
  type CachedPromptLine,
  cachedPromptLine,
  type PromptLine,
  promptLineCache,
  promptLineOf,
} from './prompt-lines.js';
import { activeEntries, publicCopy } from './ram.js';
import { readWithFallback } from './write-retry.js';

/** Entries of the key accepted while degraded and not written yet: what database reads cannot see. */
function unwrittenEntries(ctx: MemoryContext, sessionKey: string): StoredEntry[] {
  const found: StoredEntry[] = [];
  for (const ram of ctx.sessions.ofKey(sessionKey))
    found.push(...ram.entries.filter((entry) => entry.rowId === undefined));
  return found;
}

/** Loaded RAM entries of an agent (and key), newest first: what reads answer from while degraded. */
function ramEntries(ctx: MemoryContext, filter: { agentId: string; sessionKey?: string }): StoredEntry[] {
  const found: StoredEntry[] = [];
  for (const ram of ctx.sessions.values()) {
    if (ram.ref.agentId !== filter.agentId) continue;
    if (filter.sessionKey !== undefined && ram.ref.sessionKey !== filter.sessionKey) continue;
    found.push(...ram.entries);
  }
  return found.sort((left, right) => right.createdAtMs - left.createdAtMs || right.memoryId - left.memoryId);
}

/** A user or assistant message: what neighbour smoothing treats as a conversational turn. */
function isTurn(entry: Pick<StoredEntry, 'kind' | 'role' | 'state'>): boolean {
  return (
    entry.kind === 'entry' &&
    (entry.role === 'user' || entry.role === 'assistant') &&
    entry.state !== 'tombstone'
  );
}

function clampLimit(ctx: MemoryContext, limit: number | undefined, fallback: number): number {
  return Math.max(1, Math.min(ctx.config.recall.maxLimit, Math.floor(limit ?? fallback)));
}

function resolveIds(ids: ReadonlyArray<number | string>, sessionKey: string | undefined) {
  return ids.map((id) => {
    if (typeof id === 'number') {
      if (sessionKey === undefined) {
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: 'Numeric memory ids need a sessionKey; or pass addresses <sessionKey>#<n>.',
        });
      }
      return { sessionKey, memoryId: id };
    }
    const parsed =
      parseMemoryAddress(id) ??
      (sessionKey !== undefined && /^\d+$/.test(id) ? { sessionKey, memoryId: Number(id) } : undefined);
    if (!parsed)
      throw new UserInputError({
        code: ErrorCodes.invalidRequest,
        message: `"${id}" is not a memory id or address.`,
      });
    return parsed;
  });
}

/** A loaded entry as automatic recall lists it. */
function recallLineOf(entry: StoredEntry): RecallLine {
  return {
    sessionKey: entry.sessionKey,
    memoryId: entry.memoryId,
    content: entry.content,
    createdAtMs: entry.createdAtMs,
    speaker: entry.kind === 'summary' ? 'summary' : entry.role,
    storedInContext: entry.state === 'active' && entry.archivedAtMs === null,
  };
}

/** Full-text, or hybrid (full-text fused with vector similarity) search over long-term memory. */
export async function search(ctx: MemoryContext, searchOptions: SearchOptions): Promise<SearchHit[]> {
  const { config, embedder, ltm } = ctx;
  const limit = Math.max(
    1,
    Math.min(config.recall.maxLimit, Math.floor(searchOptions.limit ?? config.recall.searchDefaultLimit)),
  );
  const terms = queryTerms(searchOptions.query);
  const exclude = searchOptions.excludeAddresses ?? new Set<string>();
  const requestedRows = searchOptions.maxScoredRows;
  const maxScoredRows =
    requestedRows !== undefined && Number.isFinite(requestedRows)
      ? Math.min(config.recall.maxScoredRows, Math.max(100, Math.floor(requestedRows)))
      : config.recall.maxScoredRows;
  const mode: 'fts' | 'hybrid' = searchOptions.mode === 'fts' || !embedder ? 'fts' : 'hybrid';
  if (searchOptions.mode === 'hybrid' && !embedder) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: 'Hybrid search needs an embedding provider (memory.embeddings).',
    });
  }
  const filter: EntryFilter = {
    agentId: searchOptions.agentId,
    ...(searchOptions.sessionKey !== undefined ? { sessionKey: searchOptions.sessionKey } : {}),
    includeArchived: searchOptions.includeArchived ?? true,
    ...(searchOptions.kind && searchOptions.kind !== 'all' ? { kind: searchOptions.kind } : {}),
  };
  const toHit = (entry: StoredEntry, score: number): SearchHit => ({
    address: entry.address,
    sessionKey: entry.sessionKey,
    memoryId: entry.memoryId,
    kind: entry.kind,
    role: entry.role,
    state: entry.state,
    content: entry.content,
    score,
    createdAtMs: entry.createdAtMs,
    source: entry.archivedAtMs !== null ? 'archive' : entry.state === 'active' ? 'ram' : 'ltm',
    mode,
  });
  /**
   * The lexical ranking: BM25 over each entry and its neighbouring turns, then neighbour smoothing over
   * the candidates; entries only reached through a neighbour are read afterwards. At most `needed` entries.
   */
  // Widening passes of one search ask for the same full-text rows while `needed` stays under
  // `candidateCount`: the ranking and the entries read for it are kept for the next pass.
  let ranking:
    | {
        rowLimit: number;
        rows: number;
        ranked: ScoredTurn[];
        known: Map<string, StoredEntry>;
        read: Set<string>;
      }
    | undefined;
  const lexical = async (needed: number): Promise<Array<{ entry: StoredEntry; score: number }>> => {
    const { recall: settings } = config;
    const rowLimit = Math.max(needed, settings.candidateCount);
    // `fullText` returns the same rows for a larger `needed` unless it would now redo the ranking over every
    // match (fewer rows than needed), so only then, or with another row limit, is it asked again.
    if (!ranking || ranking.rowLimit !== rowLimit || ranking.rows < Math.min(needed, rowLimit)) {
      const rows = await ltm.fullText(
        filter,
        terms,
        rowLimit,
        settings.contextWeights,
        needed,
        maxScoredRows,
      );
      const known = new Map<string, StoredEntry>();
      const candidates = rows.map((row) => {
        const entry = rowToEntry(row);
        known.set(entry.address, entry);
        return {
          sessionKey: entry.sessionKey,
          memoryId: entry.memoryId,
          score: row.rank,
          spreads: isTurn(entry),
        };
      });
      const ranked = spreadToNeighbours(candidates, settings.neighbourWeights);
      ranking = { rowLimit, rows: rows.length, ranked, known, read: new Set(known.keys()) };
    }
    const { ranked, known, read } = ranking;
    const found: Array<{ entry: StoredEntry; score: number }> = [];
    let next = 0;
    while (found.length < needed && next < ranked.length) {
      // Read the unknown neighbours among the next best in one query; some are not turns and drop out.
      const window = ranked.slice(next, next + 2 * (needed - found.length));
      next += window.length;
      const missing = window.filter((turn) => !read.has(`${turn.sessionKey}#${turn.memoryId}`));
      for (const turn of missing) read.add(`${turn.sessionKey}#${turn.memoryId}`);
      for (const entry of await ltm.turnsAt(filter, missing)) known.set(entry.address, entry);
      for (const turn of window) {
        const entry = known.get(`${turn.sessionKey}#${turn.memoryId}`);
        if (entry && found.length < needed) found.push({ entry, score: turn.score });
      }
    }
    return found;
  };
  return readWithFallback(
    ctx,
    async () => {
      // A prompt excludes everything in its context (up to a thousand entries) while few of them rank: ask
      // for a little more than the limit and widen only while excluded entries crowd the top.
      const widening = async (
        rank: (count: number) => Promise<Array<{ entry: StoredEntry; score: number }>>,
        first: number,
      ) => {
        for (let count = first; ; count *= 4) {
          const ranked = await rank(count);
          const kept = ranked.filter(({ entry }) => !exclude.has(entry.address)).slice(0, limit);
          if (kept.length >= limit || ranked.length < count || count >= first + exclude.size)
            return kept.map(({ entry, score }) => toHit(entry, score));
        }
      };
      const headroom = Math.min(exclude.size, limit);
      if (mode === 'fts') return widening(lexical, limit + headroom);
      const [queryVector] = await embedder!.embed([searchOptions.query]);
      const fused = async (candidates: number) => {
        const [words, near] = await Promise.all([
          lexical(candidates),
          ltm.nearest(filter, embedder!.model, queryVector!, candidates),
        ]);
        const known = new Map(words.map(({ entry }) => [entry.rowId!, entry] as const));
        const order = fuseRankings([
          { items: words.map(({ entry }) => entry.rowId!), weight: 1 },
          { items: near.map((hit) => hit.rowId), weight: config.embeddings.vectorWeight },
        ]).slice(0, candidates);
        const missing = order.filter((rowId) => !known.has(rowId));
        for (const [rowId, entry] of await ltm.entriesByRowIds(missing)) known.set(rowId, entry);
        // The fused order is what counts; the score only has to fall with it.
        return order.flatMap((rowId, index) => {
          const entry = known.get(rowId);
          return entry ? [{ entry, score: 1 / (rrfRankConstant + index + 1) }] : [];
        });
      };
      return widening(fused, config.embeddings.candidateCount + headroom);
    },
    () =>
      ramMatches(ctx, filter, terms, (entry) => exclude.has(entry.address), limit).map(
        ({ entry, score }) => ({
          ...toHit(entry, score),
          mode: 'fts' as const,
        }),
      ),
  );
}

/** While the database cannot be read: loaded entries scored by how many query terms they contain. */
function ramMatches(
  ctx: MemoryContext,
  filter: EntryFilter,
  terms: ReadonlyArray<string>,
  excluded: (entry: StoredEntry) => boolean,
  limit: number,
): Array<{ entry: StoredEntry; score: number }> {
  const wanted = new Set(terms);
  return ramEntries(ctx, filter)
    .filter((entry) => entry.state !== 'tombstone' && !excluded(entry))
    .filter((entry) => !filter.kind || entry.kind === filter.kind)
    .map((entry) => {
      let score = 0;
      for (const token of new Set(wordTokens(entry.content))) if (wanted.has(token)) score++;
      return { entry, score };
    })
    .filter((scored) => scored.score > 0)
    .sort((left, right) => right.score - left.score || right.entry.memoryId - left.entry.memoryId)
    .slice(0, limit);
}

/** Summaries first, then active entries, then (optionally) replaced and archived ones, up to the limit. */
export async function recall(ctx: MemoryContext, recallOptions: RecallOptions): Promise<MemoryItem[]> {
  const { config, ltm } = ctx;
  const limit = clampLimit(ctx, recallOptions.limit, config.recall.defaultLimit);
  const includeFull = recallOptions.includeFull ?? false;
  const includeArchived = recallOptions.includeArchived ?? true;
  const itemOptions = { includeFull, previewChars: config.recall.previewChars };
  const base = {
    agentId: recallOptions.agentId,
    ...(recallOptions.sessionKey !== undefined ? { sessionKey: recallOptions.sessionKey } : {}),
  };
  return readWithFallback(
    ctx,
    async () => {
      const steps: EntryFilter[] = [
        { ...base, includeArchived: false, kind: 'summary', states: ['active', 'summarized'] },
        { ...base, includeArchived: false, kind: 'entry', states: ['active'] },
        ...(includeFull
          ? [
              {
                ...base,
                includeArchived: false,
                kind: 'entry' as const,
                states: ['summarized', 'evicted'] as const,
              },
            ]
          : []),
        ...(includeArchived
          ? [
              {
                ...base,
                includeArchived: true,
                archivedOnly: true,
                kind: 'summary' as const,
                states: ['active', 'summarized'] as const,
              },
              {
                ...base,
                includeArchived: true,
                archivedOnly: true,
                kind: 'entry' as const,
                states: includeFull ? (['active', 'summarized', 'evicted'] as const) : (['active'] as const),
              },
            ]
          : []),
      ];
      const items: MemoryItem[] = [];
      for (const filter of steps) {
        if (items.length >= limit) break;
        const entries = await ltm.listEntries(filter, limit - items.length);
        items.push(...entries.map((entry) => toMemoryItem(entry, itemOptions)));
      }
      return items;
    },
    () => {
      const entries = ramEntries(ctx, base).filter((entry) => entry.state === 'active');
      return [
        ...entries.filter((entry) => entry.kind === 'summary'),
        ...entries.filter((entry) => entry.kind === 'entry'),
      ]
        .slice(0, limit)
        .map((entry) => toMemoryItem(entry, itemOptions));
    },
  );
}

/** Entries by ids or addresses, by topic, or simply the latest, with full content. */
export async function query(ctx: MemoryContext, queryOptions: QueryOptions): Promise<MemoryItem[]> {
  const { config, ltm } = ctx;
  const limit = clampLimit(ctx, queryOptions.limit, config.recall.defaultLimit);
  const kind = queryOptions.kind && queryOptions.kind !== 'all' ? queryOptions.kind : undefined;
  const filter: EntryFilter = {
    agentId: queryOptions.agentId,
    ...(queryOptions.sessionKey !== undefined ? { sessionKey: queryOptions.sessionKey } : {}),
    includeArchived: queryOptions.includeArchived ?? true,
    ...(kind ? { kind } : {}),
  };
  const ids = queryOptions.memoryIds?.length
    ? resolveIds(queryOptions.memoryIds, queryOptions.sessionKey)
    : undefined;
  const topic = queryOptions.topic?.trim() || undefined;
  const itemOptions = { includeFull: true, previewChars: config.recall.previewChars };
  return readWithFallback(
    ctx,
    async () => {
      let entries: StoredEntry[];
      if (ids) {
        entries = await ltm.entriesByIds(filter, ids, topic ? config.recall.maxLimit : limit);
        if (topic) {
          const needle = topic.toLowerCase();
          entries = entries.filter((entry) => entry.content.toLowerCase().includes(needle)).slice(0, limit);
        }
      } else if (topic) {
        entries = await ltm.topic(filter, topic, limit);
      } else {
        entries = await ltm.listEntries(filter, limit);
      }
      return entries.map((entry) => toMemoryItem(entry, itemOptions));
    },
    () => {
      const wanted = ids ? new Set(ids.map((id) => `${id.sessionKey}#${id.memoryId}`)) : undefined;
      const needle = topic?.toLowerCase();
      return ramEntries(ctx, filter)
        .filter((entry) => !kind || entry.kind === kind)
        .filter((entry) => !wanted || wanted.has(entry.address))
        .filter((entry) => !needle || entry.content.toLowerCase().includes(needle))
        .slice(0, limit)
        .map((entry) => toMemoryItem(entry, itemOptions));
    },
  );
}

/** An entry by global address `<sessionKey>#<n>`. */
export async function getEntry(ctx: MemoryContext, address: string): Promise<MemoryEntry | undefined> {
  const parsed = parseMemoryAddress(address);
  if (!parsed) return undefined;
  return readWithFallback(
    ctx,
    async () => {
      const entry =
        (await ctx.ltm.entryByAddress(parsed.sessionKey, parsed.memoryId)) ??
        unwrittenEntries(ctx, parsed.sessionKey).find((candidate) => candidate.memoryId === parsed.memoryId);
      return entry ? publicCopy(entry) : undefined;
    },
    () => {
      for (const ram of ctx.sessions.values()) {
        const entry = ram.entries.find((candidate) => candidate.address === address);
        if (entry) return publicCopy(entry);
      }
      return undefined;
    },
  );
}

/** User and assistant entries of a key, oldest first (the last `limit` before `beforeMemoryId`). */
export async function history(
  ctx: MemoryContext,
  sessionKey: string,
  historyOptions: HistoryOptions = {},
): Promise<HistoryEntry[]> {
  const limit = Math.max(1, Math.min(1000, Math.floor(historyOptions.limit ?? 200)));
  const toHistory = (entry: StoredEntry): HistoryEntry => ({
    memoryId: entry.memoryId,
    address: entry.address,
    sessionId: entry.sessionId,
    role: entry.role as 'user' | 'assistant',
    content: entry.content,
    state: entry.state,
    createdAtMs: entry.createdAtMs,
    archived: entry.archivedAtMs !== null,
  });
  const wanted = (entry: StoredEntry) =>
    entry.kind === 'entry' &&
    (entry.role === 'user' || entry.role === 'assistant') &&
    (historyOptions.beforeMemoryId === undefined || entry.memoryId < historyOptions.beforeMemoryId);
  return readWithFallback(
    ctx,
    async () => {
      const stored = (
        await ctx.ltm.history(sessionKey, {
          limit,
          ...(historyOptions.beforeMemoryId !== undefined
            ? { beforeMemoryId: historyOptions.beforeMemoryId }
            : {}),
          includeArchived: historyOptions.includeArchived ?? false,
        })
      ).map(toHistory);
      // Stored history plus what was accepted while the database could not be written.
      const unwritten = unwrittenEntries(ctx, sessionKey).filter(wanted).map(toHistory);
      if (unwritten.length === 0) return stored;
      const known = new Set(stored.map((entry) => entry.memoryId));
      return [...stored, ...unwritten.filter((entry) => !known.has(entry.memoryId))]
        .sort((left, right) => left.memoryId - right.memoryId)
        .slice(-limit);
    },
    () =>
      ctx.sessions
        .ofKey(sessionKey)
        .flatMap((ram) => ram.entries)
        .filter(
          (entry) =>
            entry.kind === 'entry' &&
            entry.state === 'active' &&
            (entry.role === 'user' || entry.role === 'assistant'),
        )
        .filter(
          (entry) =>
            historyOptions.beforeMemoryId === undefined || entry.memoryId < historyOptions.beforeMemoryId,
        )
        .sort((left, right) => left.memoryId - right.memoryId)
        .slice(-limit)
        .map(toHistory),
  );
}

/**
 * Whether an entry is in the context of the session that `sessionKey` names: its loaded RAM context when
 * the session is loaded (`loadedSize`), else what that context would load (active, unarchived rows of the
 * key: `storedInContext`, read with the row). Only entries of that key are looked up, so the many matches of
 * other sessions cost a string comparison.
 */
interface ContextTest {
  (line: Pick<RecallLine, 'sessionKey' | 'memoryId'> & { storedInContext?: boolean }): boolean;
  /**
   * How many entries the session's context holds when it is loaded in this process (which then answers
   * without the row's state), else undefined.
   */
  loadedSize(): number | undefined;
  /**
   * Whether every row id from `fromRowId` to `toRowId` is an entry of the loaded context or one of its
   * tombstones: rows a recall for this session can leave out of the full-text index (it would leave the
   * entries out of its answer, and tombstones are never indexed).
   */
  holdsRows(fromRowId: number, toRowId: number): boolean;
}

function contextTest(ctx: MemoryContext, sessionKey: string): ContextTest {
  /** The key's contexts loaded here (none when it is not loaded), looked up on first need. */
  let loaded: RamSession[] | undefined;
  let memoryIds: Set<number> | undefined;
  const loadedContexts = () => {
    // A copy: the search awaits the database, and sessions may load or unload meanwhile.
    loaded ??= ctx.sessions.ofKey(sessionKey).slice();
    return loaded;
  };
  const test = (line: Pick<RecallLine, 'sessionKey' | 'memoryId'> & { storedInContext?: boolean }) => {
    if (line.sessionKey !== sessionKey) return false;
    const rams = loadedContexts();
    if (rams.length === 0) return line.storedInContext === true;
    if (memoryIds === undefined) {
      memoryIds = new Set();
      for (const ram of rams) for (const stored of activeEntries(ram)) memoryIds.add(stored.memoryId);
    }
    return memoryIds.has(line.memoryId);
  };
  const loadedSize = () => {
    const rams = loadedContexts();
    return rams.length === 0 ? undefined : rams.reduce((size, ram) => size + activeEntries(ram).length, 0);
  };
  // A context's entries are its active ones and its recent tombstones, which are never indexed. Row ids are
  // unique: once as many of the contexts' rows as the range has ids are found, they are all of them. The
  // range is the newest rows, and a context's newest are at its end (its newest entries, then the tombstones
  // of its latest eviction), so the scan runs backwards: a chat turn's finds them in about a quarter of a
  // context of 64 entries and 256 tombstones.
  const holdsRows = (fromRowId: number, toRowId: number) => {
    const wanted = toRowId - fromRowId + 1;
    if (wanted <= 0) return true;
    let held = 0;
    for (const ram of loadedContexts()) {
      const { entries } = ram;
      for (let index = entries.length - 1; index >= 0; index--) {
        const rowId = entries[index]!.rowId;
        if (rowId !== undefined && rowId >= fromRowId && rowId <= toRowId && ++held === wanted) return true;
      }
    }
    return false;
  };
  return Object.assign(test, { loadedSize, holdsRows });
}

/** A turn that automatic recall's smoothing scored: a candidate (with its line) or a neighbour of one. */
interface PromptSlot {
  sessionKey: string;
  memoryId: number;
  score: number;
  /** Known for candidates; neighbours are read once they reach the top. */
  line: RecallLine | undefined;
  /** Position of the session key among the keys seen, in sorted order: the tie-break of `search`'s order. */
  keyOrder: number;
}

/**
 * `spreadToNeighbours` for automatic recall's few candidates, with the same scores and the same order (ties:
 * session key, then MemoryID), keyed by key and number instead of an address string per turn, and keeping
 * each candidate's line with its score: a turn looks up nothing afterwards.
 */
function smoothPromptLines(
  candidates: ReadonlyArray<RankedLine>,
  weights: ReadonlyArray<number>,
): { ranked: PromptSlot[]; byKey: Map<string, Map<number, PromptSlot>> } {
  const byKey = new Map<string, Map<number, PromptSlot>>();
  const slots: PromptSlot[] = [];
  const add = (sessionKey: string, memoryId: number, score: number, line: RecallLine | undefined) => {
    if (memoryId < 1 || score <= 0) return;
    let ids = byKey.get(sessionKey);
    if (ids === undefined) {
      ids = new Map();
      byKey.set(sessionKey, ids);
    }
    const found = ids.get(memoryId);
    if (found === undefined) {
      const slot: PromptSlot = { sessionKey, memoryId, score, line, keyOrder: 0 };
      ids.set(memoryId, slot);
      slots.push(slot);
      return;
    }
    found.score += score;
    if (line !== undefined) found.line = line;
  };
  for (const candidate of candidates) {
    const { sessionKey, memoryId, rank } = candidate;
    add(sessionKey, memoryId, rank, candidate);
    if (!candidate.turn) continue;
    for (let index = 0; index < weights.length; index++) {
      const share = weights[index]! * rank;
      add(sessionKey, memoryId - index - 1, share, undefined);
      add(sessionKey, memoryId + index + 1, share, undefined);
    }
  }
  if (byKey.size > 1) {
    const order = new Map([...byKey.keys()].sort().map((key, index) => [key, index] as const));
    for (const slot of slots) slot.keyOrder = order.get(slot.sessionKey)!;
  }
  slots.sort(
    (left, right) =>
      right.score - left.score || left.keyOrder - right.keyOrder || left.memoryId - right.memoryId,
  );
  return { ranked: slots, byKey };
}

/**
 * Past the row budget: the newest matches of `term` among its newest `recall.promptMaxScoredRows`,
 * newest first, of the asking agent and outside the asking session's context, as many as the block lists.
 * The full-text index names the row ids a few more than needed at a time, and only the lines not cached are
 * read, in one query, with those of the asking key when its context is not loaded here (the row's state
 * says whether it is in that context). A conversation's own recent turns are the newest matches of the words
 * it keeps using, and most are in its context: where that context is loaded, they are passed over unread.
 */
async function newestPromptLines(
  ctx: MemoryContext,
  options: { agentId: string; sessionKey: string; limit: number },
  inContext: ContextTest,
  term: string,
  listed?: ReadonlySet<string>,
): Promise<PromptLine[]> {
  const { ltm, config } = ctx;
  const maxRows = config.recall.promptMaxScoredRows;
  const previewChars = config.recall.previewChars;
  const cache = promptLineCache(ctx);
  const contextSize = inContext.loadedSize();
  const loadedHere = contextSize !== undefined;
  const found: PromptLine[] = [];
  let seen = 0;
  let below: number | undefined;
  // The first lookup also covers the asking context, whose turns are often the newest matches: a second
  // lookup costs as much as the first (FTS5 reads the term's whole doclist either way).
  let batch = 2 * options.limit + (contextSize ?? 0);
  while (found.length < options.limit && seen < maxRows) {
    const size = Math.min(batch, maxRows - seen);
    const rowIds = await ltm.newestMatchRowIds(term, size, below, inContext.holdsRows);
    seen += rowIds.length;
    for (let at = 0; at < rowIds.length && found.length < options.limit; ) {
      // The row ids from `at` whose kept lines and unread rows could fill the block if all of them passed:
      // at most as many rows are read as lines are missing, as a join that stops once enough pass would.
      const unread: number[] = [];
      // Taken now: adding the lines read may drop kept ones.
      const kept: Array<CachedPromptLine | undefined> = [];
      let end = at;
      for (let could = found.length; end < rowIds.length && could < options.limit; end++) {
        const cached = cache.get(rowIds[end]!);
        kept.push(cached);
        if (cached === undefined || (cached.sessionKey === options.sessionKey && !loadedHere)) {
          unread.push(rowIds[end]!);
          could++;
        } else if (cached.agentId === options.agentId && !inContext(cached)) could++;
      }
      // Most lines come from the cache: no query (nor a promise) for none.
      const read =
        unread.length > 0
          ? new Map((await ltm.linesByRowIds(unread)).map((line) => [line.rowId, line]))
          : undefined;
      for (let index = 0; at < end; at++, index++) {
        const rowId = rowIds[at]!;
        const fresh = read?.get(rowId);
        let line = kept[index];
        if (fresh !== undefined) {
          if (line === undefined) {
            line = cachedPromptLine(fresh, previewChars);
            cache.set(rowId, line);
          }
          // A row of the asking key that is active and unarchived is in that session's context, or will be
          // once the session loads; a loaded context is asked as well.
          if (fresh.sessionKey === options.sessionKey && (fresh.storedInContext || inContext(fresh)))
            continue;
        } else if (
          line === undefined ||
          (line.sessionKey === options.sessionKey && (!loadedHere || inContext(line)))
        )
          continue; // deleted meanwhile (a row read and not found), or in the loaded context
        if (line.agentId !== options.agentId) continue;
        if (listed?.has(addressOf(line))) continue;
        found.push(cache.lineOf(rowId, line, previewChars));
      }
    }
    if (rowIds.length < size) break;
    below = rowIds[rowIds.length - 1];
    batch *= 4;
  }
  return found;
}

/** An entry's address, `<sessionKey>#<MemoryID>` (see `parseMemoryAddress`). */
const addressOf = (line: { sessionKey: string; memoryId: number }) => `${line.sessionKey}#${line.memoryId}`;

/**
 * Automatic recall's ranking, the lexical ranking of `search` made cheap enough to run before every chat
 * turn: at most `recall.promptMaxScoredRows` rows ranked, `recall.promptCandidates` candidates smoothed,
 * read with their text in the ranking query (no JSON decoded), the session's context left out as entries
 * come (no list of it is built or read), and only neighbours that reach the top read afterwards; past the
 * budget, the newest `limit` matches of the rarest term outside the context (`newestPromptLines`). The best
 * `limit`, best first. When the budget left a term out and the terms kept fill fewer than `limit` lines,
 * the newest matches of that term outside the context follow them, as matches of a commoner word come after
 * those of the rarer ones in a ranking of every match: the terms kept may match nothing but the asking
 * message itself, which the context holds ("which turn was last?" after many turns about turns).
 */
async function promptLines(
  ctx: MemoryContext,
  options: { agentId: string; sessionKey: string; terms: ReadonlyArray<string>; limit: number },
): Promise<PromptLine[]> {
  const { config, ltm } = ctx;
  const settings = config.recall;
  const filter: EntryFilter = { agentId: options.agentId, includeArchived: true };
  const inContext = contextTest(ctx, options.sessionKey);
  const candidates = await ltm.rankedLines(
    filter,
    options.terms,
    settings.promptCandidates,
    settings.contextWeights,
    settings.promptMaxScoredRows,
    inContext.holdsRows,
  );
  if (candidates.order === 'newest') return newestPromptLines(ctx, options, inContext, candidates.term);
  const { ranked, byKey } = smoothPromptLines(candidates.lines, settings.neighbourWeights);
  const found: PromptLine[] = [];
  const listed = new Set<string>();
  let next = 0;
  while (found.length < options.limit && next < ranked.length) {
    // The next best outside the context; neighbours only reached through a candidate are read in one query
    // (a few more than missing, for those that turn out not to be turns).
    const window: PromptSlot[] = [];
    const unknown: PromptSlot[] = [];
    while (
      window.length < options.limit - found.length + Math.min(unknown.length, 4) &&
      next < ranked.length
    ) {
      const slot = ranked[next++]!;
      if (slot.line === undefined) unknown.push(slot);
      else if (inContext(slot.line)) continue;
      window.push(slot);
    }
    if (unknown.length > 0)
      for (const line of await ltm.turnLinesAt(filter, unknown))
        byKey.get(line.sessionKey)!.get(line.memoryId)!.line = line;
    for (const slot of window)
      if (slot.line !== undefined && !inContext(slot.line) && found.length < options.limit) {
        found.push(promptLineOf(slot.line, settings.previewChars));
        listed.add(addressOf(slot.line));
      }
  }
  if (found.length < options.limit && candidates.leftOut !== undefined) {
    const rest = { ...options, limit: options.limit - found.length };
    found.push(...(await newestPromptLines(ctx, rest, inContext, candidates.leftOut, listed)));
  }
  return found;
}

/** A short block of relevant memories for the prompt, leaving out what is already in the context. */
export async function recallForPrompt(
  ctx: MemoryContext,
  promptOptions: { agentId: string; sessionKey: string; query: string; maxTokens?: number },
): Promise<string> {
  const { config } = ctx;
  const maxTokens = promptOptions.maxTokens ?? config.recall.promptMaxTokens;
  // A prompt of stopwords alone ("what is it?", "and then?") says nothing to search for: every turn holds
  // those words, and recalling by them only costs the prompt tokens and the turn time.
  const terms = contentTerms(promptOptions.query);
  if (terms.length === 0) return '';
  const limit = config.recall.searchDefaultLimit;
  const lines = await readWithFallback(
    ctx,
    () =>
      promptLines(ctx, {
        agentId: promptOptions.agentId,
        sessionKey: promptOptions.sessionKey,
        terms,
        limit,
      }),
    () => {
      const inContext = contextTest(ctx, promptOptions.sessionKey);
      return ramMatches(
        ctx,
        { agentId: promptOptions.agentId, includeArchived: true },
        terms,
        (entry) => inContext(recallLineOf(entry)),
        limit,
      ).map(({ entry }) => promptLineOf(recallLineOf(entry), config.recall.previewChars));
    },
  );
  const header = 'Relevant memories from earlier conversations (may be outdated):';
  const block: string[] = [];
  let used = estimateTokens(header);
  for (const line of lines) {
    if (used + line.tokens > maxTokens) break;
    block.push(line.text);
    used += line.tokens;
  }
  return block.length === 0 ? '' : `${header}\n${block.join('\n')}`;
}
