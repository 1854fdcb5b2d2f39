import type { ModelMessage } from '../../model/index.js';
import { ErrorCodes, SystemError, UserInputError } from '../../util/index.js';
import { modelMessageOf } from '../items.js';
import { byContextOrder, type Retirement, type StoredEntry } from '../ltm-store.js';
import type { AppendInput, MemoryEntry, MemoryEventPayload, SessionRef, SessionStats } from '../types.js';
import { checkRef, copyRecord, type MemoryContext, parseAppendInput, type RamSession } from './context.js';
import { queueEmbedding } from './embedding-indexer.js';
import type { AlsoInTransaction } from './types.js';
import { commit, enterDegraded } from './write-retry.js';

/** A memory event's own fields; the session's identity is added from its RAM context. */
export type EventDetail = Omit<MemoryEventPayload, 'sessionKey' | 'sessionId' | 'agentId'>;

/**
 * A deep enough copy for callers: RAM entries must not change under them, nor they under RAM. Field by
 * field rather than a rest spread, which copied every entry twice: a turn copies its whole context.
 */
export function publicCopy(entry: StoredEntry): MemoryEntry {
  const copy: MemoryEntry = {
    memoryId: entry.memoryId,
    address: entry.address,
    sessionId: entry.sessionId,
    sessionKey: entry.sessionKey,
    agentId: entry.agentId,
    kind: entry.kind,
    role: entry.role,
    state: entry.state,
    content: entry.content,
    relatedTo: entry.relatedTo,
    tokens: entry.tokens,
    createdAtMs: entry.createdAtMs,
    archivedAtMs: entry.archivedAtMs,
  };
  if (entry.metadata) copy.metadata = copyRecord(entry.metadata);
  if (entry.sourceIds) copy.sourceIds = [...entry.sourceIds];
  if (entry.toolCalls)
    copy.toolCalls = entry.toolCalls.map((call) => ({ ...call, arguments: copyRecord(call.arguments) }));
  if (entry.toolCallId !== undefined) copy.toolCallId = entry.toolCallId;
  if (entry.toolName !== undefined) copy.toolName = entry.toolName;
  if (entry.isError !== undefined) copy.isError = entry.isError;
  return copy;
}

/**
 * The read-only copy of an entry that pins hand out, made once per entry and kept on it: a chat turn pins
 * its whole context, and copying every entry on every turn was the memory service's largest cost in a
 * turn's profile (then finding each copy in a WeakMap was the next). Frozen, so no caller can change what
 * the next turn is given; RAM never changes an entry once it is built.
 */
function pinnedView(entry: StoredEntry): Readonly<MemoryEntry> {
  let view = entry.pinnedView;
  if (view === undefined) {
    const copy = publicCopy(entry);
    if (copy.metadata) Object.freeze(copy.metadata);
    if (copy.sourceIds) Object.freeze(copy.sourceIds);
    if (copy.toolCalls) {
      for (const call of copy.toolCalls) Object.freeze(Object.freeze(call).arguments);
      Object.freeze(copy.toolCalls);
    }
    view = Object.freeze(copy);
    entry.pinnedView = view;
  }
  return view;
}

/** The entry as a model message, made once per entry and frozen like its view. */
function modelMessage(entry: StoredEntry): Readonly<ModelMessage> {
  let message = entry.modelMessage;
  if (message === undefined) {
    message = Object.freeze(modelMessageOf(pinnedView(entry)));
    entry.modelMessage = message;
  }
  return message;
}

/** Whether a lease holds `entry`, one of `ram`'s active entries. */
export function isPinned(ram: RamSession, entry: StoredEntry): boolean {
  if ((entry.pins ?? 0) > 0) return true;
  for (const upTo of ram.contextPins) if (entry.memoryId <= upTo) return true;
  return false;
}

/**
 * The active entries in context order, a copy the caller may keep. Listed once and then kept by the appends:
 * every pin asks for them, and a pass over the context's entries costs a cache miss an entry.
 */
export function activeOf(ram: RamSession): StoredEntry[] {
  return activeList(ram).slice();
}

/**
 * The active entries in context order, the context's own list (no copy): for reading within one call, never
 * to keep, since the context's appends and evictions change it.
 */
export function activeEntries(ram: RamSession): ReadonlyArray<StoredEntry> {
  return activeList(ram);
}

/** The RAM context's own list of active entries: for reading here, never to hand out. */
function activeList(ram: RamSession): StoredEntry[] {
  if (ram.active === undefined) {
    const active: StoredEntry[] = [];
    for (const entry of ram.entries) if (entry.state === 'active') active.push(entry);
    ram.active = active;
  }
  return ram.active;
}

/** The conversation of the active entries, one message for each in `activeOf`'s order, a copy. */
function activeMessagesOf(ram: RamSession): Array<Readonly<ModelMessage>> {
  ram.activeMessages ??= activeList(ram).map(modelMessage);
  return ram.activeMessages.slice();
}

/** An eviction, a summary or a load changed the context: its lists are made again when next asked for. */
function forgetActiveLists(ram: RamSession): void {
  ram.totals = undefined;
  ram.active = undefined;
  ram.activeMessages = undefined;
}

/**
 * The count and tokens of the active entries. The limit checks of every append (before and after it, and
 * when a pin is released) ask for them, and find the context within its limits almost every time: they are
 * counted once (past up to `maxRamTombstones` tombstones) and then kept by the appends.
 */
function activeTotals(ram: RamSession): { readonly count: number; readonly tokens: number } {
  if (ram.totals !== undefined) return ram.totals;
  const active = activeList(ram);
  ram.totals = { count: active.length, tokens: tokensOf(active) };
  return ram.totals;
}

export function tokensOf(entries: ReadonlyArray<StoredEntry>): number {
  let total = 0;
  for (const entry of entries) total += entry.tokens;
  return total;
}

export function entryTokens(input: {
  content: string;
  toolCalls?: ReadonlyArray<{ name: string; arguments: Record<string, unknown> }>;
}): number {
  let chars = input.content.length;
  for (const call of input.toolCalls ?? []) chars += call.name.length + JSON.stringify(call.arguments).length;
  return Math.ceil(chars / 4) + 4;
}

/**
 * The marker left where an entry was evicted or summarized: it keeps the replaced entry's context position
 * and costs no tokens, so the context still shows what went and where to find it.
 */
export function tombstoneFor(
  ram: RamSession,
  memoryId: number,
  replaced: StoredEntry,
  content: string,
  metadata: Record<string, unknown>,
  nowMs: number,
): StoredEntry {
  return {
    // Spelled out, not spread: see buildEntry.
    memoryId,
    address: `${ram.ref.sessionKey}#${memoryId}`,
    sessionId: ram.ref.sessionId,
    sessionKey: ram.ref.sessionKey,
    agentId: ram.ref.agentId,
    kind: 'entry',
    role: 'system',
    state: 'tombstone',
    content,
    relatedTo: replaced.memoryId,
    tokens: 0,
    createdAtMs: nowMs,
    archivedAtMs: null,
    metadata,
    orderKey: replaced.orderKey,
    rowId: undefined,
  };
}

export function idRange(ids: ReadonlyArray<number>): string {
  if (ids.length === 0) return '';
  return ids.length === 1 ? `#${ids[0]}` : `#${ids[0]}–#${ids[ids.length - 1]}`;
}

export function statsOf(ram: RamSession): SessionStats {
  const active = activeOf(ram);
  return {
    sessionId: ram.ref.sessionId,
    sessionKey: ram.ref.sessionKey,
    agentId: ram.ref.agentId,
    activeEntries: active.length,
    activeTokens: tokensOf(active),
    tombstones: ram.entries.length - active.length,
    pinned: active.filter((entry) => isPinned(ram, entry)).length,
    nextMemoryId: ram.nextId,
    lastActiveMs: ram.lastActiveMs,
  };
}

export function publishEvent(ctx: MemoryContext, ram: RamSession, detail: EventDetail): MemoryEventPayload {
  const payload: MemoryEventPayload = {
    sessionKey: ram.ref.sessionKey,
    sessionId: ram.ref.sessionId,
    agentId: ram.ref.agentId,
    ...detail,
  };
  ctx.bus.publish('memory:event', payload, { sessionKey: ram.ref.sessionKey, agentId: ram.ref.agentId });
  return payload;
}

/** The `memory_events` row recording `payload`. */
export function eventRow(ctx: MemoryContext, ram: RamSession, payload: EventDetail, nowMs: number) {
  return {
    id: ctx.newId('mev'),
    sessionId: ram.ref.sessionId,
    sessionKey: ram.ref.sessionKey,
    agentId: ram.ref.agentId,
    kind: payload.kind,
    count: payload.count,
    tokensBefore: payload.tokensBefore,
    tokensAfter: payload.tokensAfter,
    memoryIds: payload.memoryIds,
    message: payload.message,
    ...(payload.reason ? { details: { reason: payload.reason } } : {}),
    createdAtMs: nowMs,
  };
}

/** The session's RAM context if it is loaded; a conflict if its id is loaded under another key. */
function loadedSession(ctx: MemoryContext, ref: SessionRef): RamSession | undefined {
  const existing = ctx.sessions.get(ref.sessionId);
  if (existing !== undefined && existing.ref.sessionKey !== ref.sessionKey) {
    throw new UserInputError({
      code: ErrorCodes.conflict,
      message: `Session ${ref.sessionId} belongs to ${existing.ref.sessionKey}, not ${ref.sessionKey}.`,
    });
  }
  return existing;
}

/** LOAD: the session's RAM context, read from the database the first time (or from RAM while degraded). */
export async function ensureLoaded(ctx: MemoryContext, ref: SessionRef): Promise<RamSession> {
  const existing = loadedSession(ctx, ref);
  if (existing) return existing;
  const { sessions, ltm, config } = ctx;
  let entries: StoredEntry[] = [];
  let nextId = ctx.writes.ramCounters.get(ref.sessionKey) ?? 1;
  let knowsStoredActive = false;
  try {
    const row = await ltm.getSession(ref.sessionId);
    if (row?.archivedAtMs != null) {
      throw new UserInputError({
        code: ErrorCodes.conflict,
        message: `Session ${ref.sessionId} (${ref.sessionKey}) was archived; start a new session instance to continue.`,
      });
    }
    if (row && row.ref.sessionKey !== ref.sessionKey) {
      throw new UserInputError({
        code: ErrorCodes.conflict,
        message: `Session ${ref.sessionId} belongs to ${row.ref.sessionKey}, not ${ref.sessionKey}.`,
      });
    }
    entries = await ltm.loadRam(ref, row?.ids, config.maxRamTombstones);
    nextId = Math.max(nextId, await ltm.nextIdOf(ref.sessionKey));
    knowsStoredActive = true;
  } catch (error) {
    if (UserInputError.isInstance(error)) throw error;
    enterDegraded(ctx, error);
  }
  // Ids handed out in RAM-only mode by another instance of this key must not be reused either.
  for (const other of sessions.ofKey(ref.sessionKey)) nextId = Math.max(nextId, other.nextId);
  const ram: RamSession = {
    ref,
    entries,
    totals: undefined,
    active: undefined,
    activeMessages: undefined,
    pinnedEntries: 0,
    contextPins: [],
    busy: new Set(),
    lastActiveMs: ctx.clock.now(),
    nextId,
    storedActiveMs: undefined,
    knowsStoredActive,
  };
  sessions.add(ram);
  unloadLeastRecent(ctx, ram);
  const active = activeOf(ram);
  if (active.length > 0) {
    publishEvent(ctx, ram, {
      kind: 'restored',
      count: active.length,
      tokensBefore: 0,
      tokensAfter: tokensOf(active),
      memoryIds: active.map((entry) => entry.memoryId),
      message: `restored ${active.length} active entries from the database`,
    });
    // A crash between an append and its eviction can leave one entry too many; restore the invariant.
    await enforceLimits(ctx, ram);
  }
  return ram;
}

/**
 * Keeps the RAM contexts within `maxLoadedEntries`: past it, the least recently active sessions other than
 * `current` are unloaded (each under its own lock, where `unload` keeps any that is pinned, busy or holds
 * entries not written through). Not awaited: the load or append that got over the budget does not wait for
 * other sessions' locks.
 */
function unloadLeastRecent(ctx: MemoryContext, current: RamSession): void {
  // Each session holds at most its active entries and its tombstones (beyond the limits only for the moment
  // an append takes): while that bound fits the budget, this per-append path only keeps this session's count.
  const perSession = ctx.config.maxActiveEntries + ctx.config.maxRamTombstones;
  ctx.sessions.recount(current);
  if (ctx.sessions.size * perSession <= ctx.maxLoadedEntries) return;
  // Past that bound the loaded sessions' running count decides, and only a count over the budget has every
  // context counted again: summing them all on every append cost a server holding 10,000 idle sessions about
  // a quarter of each chat turn.
  if (ctx.sessions.countedEntries <= ctx.maxLoadedEntries) return;
  let total = ctx.sessions.recountAll();
  if (total <= ctx.maxLoadedEntries) return;
  const oldestFirst = [...ctx.sessions.values()]
    .filter((ram) => ram !== current)
    .sort((left, right) => left.lastActiveMs - right.lastActiveMs);
  for (const ram of oldestFirst) {
    if (total <= ctx.maxLoadedEntries) break;
    total -= ram.entries.length;
    const { lastActiveMs } = ram;
    unload(ctx, ram.ref.sessionId, lastActiveMs).catch((error: unknown) =>
      ctx.logger.warn({ err: error, sessionKey: ram.ref.sessionKey }, 'unloading an idle session failed'),
    );
  }
}

/** Runs `work` on the session's RAM context under the session's FIFO lock. */
export function withSession<T>(
  ctx: MemoryContext,
  ref: SessionRef,
  work: (ram: RamSession) => Promise<T>,
): Promise<T> {
  const checked = checkRef(ref);
  return ctx.mutex.run(checked.sessionId, () => {
    // A loaded session, every turn's case, goes to `work` without a promise of its own.
    const loaded = loadedSession(ctx, checked);
    return loaded ? work(loaded) : ensureLoaded(ctx, checked).then(work);
  });
}

/**
 * Keeps the newest `maxRamTombstones` tombstones. A long session is at the cap after every eviction, over it
 * by the eviction's count; the tombstones to drop are then almost always the first ones in context order
 * (evictions take the oldest entries, and each tombstone takes a higher id than the last), which one pass
 * confirms before the entries are compacted in place. Only otherwise are the tombstones' ids sorted.
 */
function dropTombstoneOverflow(ctx: MemoryContext, ram: RamSession): void {
  const { maxRamTombstones } = ctx.config;
  const { entries } = ram;
  let count = 0;
  for (const entry of entries) if (entry.state === 'tombstone') count++;
  const overflow = count - maxRamTombstones;
  if (overflow <= 0) return;
  let seen = 0;
  let firstMaxId = Number.NEGATIVE_INFINITY;
  let restMinId = Number.POSITIVE_INFINITY;
  for (const entry of entries) {
    if (entry.state !== 'tombstone') continue;
    if (seen++ < overflow) firstMaxId = Math.max(firstMaxId, entry.memoryId);
    else restMinId = Math.min(restMinId, entry.memoryId);
  }
  let lastDropped = firstMaxId;
  if (firstMaxId > restMinId) {
    const ids = new Float64Array(count);
    let index = 0;
    for (const entry of entries) if (entry.state === 'tombstone') ids[index++] = entry.memoryId;
    // Ids are unique within a session: the oldest `overflow` tombstones are those up to this one.
    lastDropped = ids.sort()[overflow - 1]!;
  }
  let kept = 0;
  for (const entry of entries)
    if (entry.state !== 'tombstone' || entry.memoryId > lastDropped) entries[kept++] = entry;
  entries.length = kept;
}

/**
 * Swaps the entries `ids` for what replaced them (tombstones, a summary), keeping context order. An
 * eviction's tombstones take their entries' places one for one, so the entries usually stay in order
 * and one pass confirms it; only otherwise (a summary folding several entries) are they sorted.
 */
export function replaceInRam(
  ctx: MemoryContext,
  ram: RamSession,
  ids: ReadonlyArray<number>,
  replacements: StoredEntry[],
): void {
  const oneForOne = replacements.length === ids.length;
  const byReplaced = new Map<number, StoredEntry | undefined>();
  ids.forEach((id, index) => {
    byReplaced.set(id, oneForOne ? replacements[index] : undefined);
  });
  let next: StoredEntry[] = [];
  let placed = 0;
  for (const entry of ram.entries) {
    if (!byReplaced.has(entry.memoryId)) {
      next.push(entry);
      continue;
    }
    const replacement = byReplaced.get(entry.memoryId);
    if (replacement?.orderKey === entry.orderKey) {
      next.push(replacement);
      placed++;
    }
  }
  let sorted = placed === replacements.length;
  if (!sorted) next = [...next.filter((entry) => !replacements.includes(entry)), ...replacements];
  for (let index = 1; sorted && index < next.length; index++)
    if (byContextOrder(next[index - 1]!, next[index]!) > 0) sorted = false;
  ram.entries = sorted ? next : next.sort(byContextOrder);
  forgetActiveLists(ram);
  dropTombstoneOverflow(ctx, ram);
  ctx.sessions.recount(ram);
}

/**
 * An eviction's swap in RAM: each victim's tombstone takes its place, in place, and the active lists lose
 * their front. The victims are the first active entries in context order (`evictEntries` checks it), so the
 * active lists, their messages and totals are trimmed rather than made again from every entry and tombstone
 * at the next pin. A tombstone sorts where its entry did unless another entry shares its context position (a
 * summary's); its neighbours tell, and the context is sorted only then.
 */
function evictInRam(
  ctx: MemoryContext,
  ram: RamSession,
  victims: StoredEntry[],
  tombstones: StoredEntry[],
): void {
  const { entries } = ram;
  const count = victims.length;
  const at: number[] = [];
  for (let index = 0; at.length < count && index < entries.length; index++)
    if (entries[index] === victims[at.length]) at.push(index);
  // Only a change of the context under the session's lock, between picking the victims and here, could.
  if (at.length < count)
    throw new SystemError({ code: ErrorCodes.internal, message: 'evicted entries left the RAM context' });
  for (let index = 0; index < count; index++) entries[at[index]!] = tombstones[index]!;
  let sorted = true;
  for (const index of at) {
    const entry = entries[index]!;
    if (index > 0 && byContextOrder(entries[index - 1]!, entry) > 0) sorted = false;
    if (index + 1 < entries.length && byContextOrder(entry, entries[index + 1]!) > 0) sorted = false;
  }
  if (!sorted) entries.sort(byContextOrder);
  const totals = activeTotals(ram);
  activeList(ram).splice(0, count);
  ram.activeMessages?.splice(0, count);
  ram.totals = { count: totals.count - count, tokens: totals.tokens - tokensOf(victims) };
  dropTombstoneOverflow(ctx, ram);
}

/**
 * The oldest active entries that may be replaced: whole groups (an assistant tool call with its tool
 * results) from the front, stopping at the first pinned or busy entry, leaving `keepLatest` entries.
 */
export function pickOldest(
  ram: RamSession,
  wantMore: (takenCount: number, takenTokens: number) => boolean,
  keepLatest: number,
): StoredEntry[] {
  const active = activeOf(ram);
  const groups: StoredEntry[][] = [];
  for (const entry of active) {
    if (
      entry.role === 'tool' &&
      groups.length > 0 &&
      groups[groups.length - 1]!.some((member) => member.toolCalls?.length)
    ) {
      groups[groups.length - 1]!.push(entry);
    } else {
      groups.push([entry]);
    }
  }
  const taken: StoredEntry[] = [];
  let takenTokens = 0;
  for (const group of groups) {
    if (!wantMore(taken.length, takenTokens)) break;
    if (group.some((entry) => isPinned(ram, entry) || ram.busy.has(entry.memoryId))) break;
    if (active.length - taken.length - group.length < keepLatest) break;
    taken.push(...group);
    takenTokens += tokensOf(group);
  }
  return taken;
}

/** What evicting `victims` writes and announces: the event, the tombstones, the rows' new state. */
function evictionOf(
  ctx: MemoryContext,
  ram: RamSession,
  victims: StoredEntry[],
  reason: string,
  tokensBefore: number,
  nowMs: number,
) {
  const ids = victims.map((entry) => entry.memoryId);
  const detail = {
    kind: 'evicted' as const,
    count: victims.length,
    tokensBefore,
    tokensAfter: tokensBefore - tokensOf(victims),
    memoryIds: ids,
    message: `evicted ${victims.length} oldest entries (${idRange(ids)}) to long-term memory`,
    reason,
  };
  return {
    ids,
    detail,
    tombstones: (first: number) =>
      victims.map((victim, index) =>
        tombstoneFor(ram, first + index, victim, `[evicted:${victim.memoryId}]`, { reason }, nowMs),
      ),
    retire: {
      memoryIds: ids,
      state: 'evicted',
      nowMs,
      event: eventRow(ctx, ram, detail, nowMs),
    } satisfies Retirement,
  };
}

/**
 * Moves `victims` to long-term memory, leaving tombstones in their place. They must be the oldest active
 * entries, in context order (what `pickOldest` picks): anything else is refused before anything is written.
 */
export async function evictEntries(
  ctx: MemoryContext,
  ram: RamSession,
  victims: StoredEntry[],
  reason: string,
): Promise<number[]> {
  if (victims.length === 0) return [];
  const active = activeList(ram);
  if (victims.some((victim, index) => active[index] !== victim))
    throw new SystemError({
      code: ErrorCodes.internal,
      message: `evicting ${idRange(victims.map((victim) => victim.memoryId))}: not the oldest active entries`,
    });
  const nowMs = ctx.clock.now();
  const eviction = evictionOf(ctx, ram, victims, reason, activeTotals(ram).tokens, nowMs);
  const tombstones = await commit(ctx, ram, victims.length, eviction.tombstones, undefined, {
    retire: eviction.retire,
  });
  evictInRam(ctx, ram, victims, tombstones);
  publishEvent(ctx, ram, eviction.detail);
  return eviction.ids;
}

/**
 * The oldest entries the limits would evict once `incoming` entries are appended, so the append can evict
 * them in its own commit, and the active tokens after the append (the eviction's `tokensBefore`): the same
 * whole groups the eviction after the append would pick, since the incoming entries come last. The one group
 * the append can still change is the last stored one, when the batch starts with tool results that may
 * belong to its tool calls: when the eviction would reach it, there are no victims here and the eviction
 * after the append, which sees that group whole, takes them in a commit of its own.
 */
function victimsAfterAppend(
  ctx: MemoryContext,
  ram: RamSession,
  incoming: ReadonlyArray<{ role: string; tokens: number }>,
): { victims: StoredEntry[]; tokens: number } {
  const { config } = ctx;
  const totals = activeTotals(ram);
  let { tokens } = totals;
  for (const entry of incoming) tokens += entry.tokens;
  const count = totals.count + incoming.length;
  if (count <= config.maxActiveEntries && tokens <= config.maxActiveTokens) return { victims: [], tokens };
  const target = evictionTarget(config);
  const victims = pickOldest(
    ram,
    (takenCount, takenTokens) => count - takenCount > target.entries || tokens - takenTokens > target.tokens,
    // The incoming entries are the latest; of the others none has to stay.
    0,
  );
  if (victims.length === totals.count && incoming[0]?.role === 'tool') return { victims: [], tokens };
  return { victims, tokens };
}

/**
 * What an eviction brings a context down to once a limit is passed: `evictDownToRatio` of each limit, so the
 * next few appends fit without another eviction (and its commit of tombstones, states and an event).
 */
function evictionTarget(config: MemoryContext['config']): { entries: number; tokens: number } {
  const ratio = config.evictDownToRatio;
  return {
    entries: Math.max(1, Math.floor(config.maxActiveEntries * ratio)),
    tokens: Math.floor(config.maxActiveTokens * ratio),
  };
}

/**
 * The hard limit: past it, evict the oldest groups down to the eviction target (tombstones do not count).
 */
export async function enforceLimits(ctx: MemoryContext, ram: RamSession): Promise<void> {
  const { config } = ctx;
  const { count, tokens } = activeTotals(ram);
  if (count <= config.maxActiveEntries && tokens <= config.maxActiveTokens) return;
  const target = evictionTarget(config);
  const victims = pickOldest(
    ram,
    (takenCount, takenTokens) => count - takenCount > target.entries || tokens - takenTokens > target.tokens,
    1,
  );
  await evictEntries(ctx, ram, victims, 'limit');
}

export function buildEntry(
  ram: RamSession,
  input: AppendInput,
  memoryId: number,
  nowMs: number,
  tokens = entryTokens(input),
): StoredEntry {
  // One literal with every field, not a spread of shared identity fields: after about a thousand sessions V8 gave
  // every spread-built entry a hidden class of its own (seen in heap snapshots; 4 KiB of RAM context per
  // idle session of two turns instead of 2 KiB). A plain literal keeps one shared hidden class.
  const entry: StoredEntry = {
    memoryId,
    address: `${ram.ref.sessionKey}#${memoryId}`,
    sessionId: ram.ref.sessionId,
    sessionKey: ram.ref.sessionKey,
    agentId: ram.ref.agentId,
    kind: 'entry',
    role: input.role,
    state: 'active',
    content: input.content,
    relatedTo: null,
    tokens,
    createdAtMs: input.createdAtMs ?? nowMs,
    archivedAtMs: null,
    orderKey: memoryId,
    rowId: undefined,
  };
  if (input.metadata) entry.metadata = input.metadata;
  if (input.role === 'assistant' && input.toolCalls?.length) entry.toolCalls = input.toolCalls;
  if (input.role === 'tool') {
    entry.toolCallId = input.toolCallId;
    entry.toolName = input.toolName;
    entry.isError = input.isError ?? false;
  }
  return entry;
}

/** Pins the chosen active entries; the lease's `release` enforces the limits that pins held off. */
export function pinEntries(
  ctx: MemoryContext,
  ram: RamSession,
  memoryIds?: ReadonlyArray<number>,
): PinnedContext {
  const active = activeOf(ram);
  if (!memoryIds) {
    // The whole context: one mark for the session rather than a count on each entry, which a chat turn
    // would write on every entry of its context twice.
    const upTo = ram.nextId - 1;
    ram.contextPins.push(upTo);
    return new PinnedContext(ctx, ram, active, activeMessagesOf(ram), active, upTo);
  }
  const wanted = new Set(memoryIds);
  const pinned = active.filter((entry) => wanted.has(entry.memoryId));
  for (const entry of pinned) {
    entry.pins = (entry.pins ?? 0) + 1;
    if (entry.pins === 1) ram.pinnedEntries++;
  }
  return new PinnedContext(ctx, ram, active, activeMessagesOf(ram), pinned, undefined);
}

/**
 * A pin's lease. A class, not a literal with getters: such a literal, made per turn, kept its getters'
 * closures and all they reach (the session's context) alive through young-generation collections until a
 * full one (docs/decisions/0026-no-per-call-getter-literals.md).
 */
class PinnedContext {
  private released = false;
  private pinnedIds: number[] | undefined = undefined;
  private pinnedViews: Array<Readonly<MemoryEntry>> | undefined = undefined;

  constructor(
    private readonly ctx: MemoryContext,
    private readonly ram: RamSession,
    private readonly active: StoredEntry[],
    /** The conversation of `active`, taken from the RAM context's list. */
    private readonly messages: Array<Readonly<ModelMessage>>,
    private readonly pinned: StoredEntry[],
    /** For a lease of the whole context, its mark in `ram.contextPins`. */
    private readonly contextUpTo: number | undefined,
  ) {}

  // Made when read: a chat turn reads only the messages, and each of these is a pass over its context.
  get memoryIds(): number[] {
    this.pinnedIds ??= this.pinned.map((entry) => entry.memoryId);
    return this.pinnedIds;
  }

  get entries(): ReadonlyArray<Readonly<MemoryEntry>> {
    this.pinnedViews ??= this.active.map(pinnedView);
    return this.pinnedViews;
  }

  modelMessages(): Array<Readonly<ModelMessage>> {
    return this.messages.slice();
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    const { ctx, ram } = this;
    if (this.contextUpTo !== undefined) {
      // Any one of equal marks: they pin the same entries.
      ram.contextPins.splice(ram.contextPins.indexOf(this.contextUpTo), 1);
    } else {
      for (const entry of this.pinned) {
        // This lease counted itself on each of these entries, and releases once.
        entry.pins = entry.pins! - 1;
        if (entry.pins === 0) ram.pinnedEntries--;
      }
    }
    // Limits could not be enforced over pinned entries; do it now, in the session's queue.
    if (ctx.sessions.get(ram.ref.sessionId) !== ram) return;
    ctx.mutex
      .run(ram.ref.sessionId, async () => {
        // The lock starts work for a free key at once: what the caller does next comes first. An append it
        // makes at once queues behind this and evicts what is over the limits in its own commit.
        await undefined;
        if ((ctx.appendsWaiting.get(ram.ref.sessionId) ?? 0) > 0) return;
        if (ctx.sessions.get(ram.ref.sessionId) === ram) await enforceLimits(ctx, ram);
      })
      .catch((error) =>
        ctx.logger.warn(
          { err: error, sessionKey: ram.ref.sessionKey },
          'enforcing limits after unpin failed',
        ),
      );
  }
}

/**
 * Drops an idle RAM context; false while pinned, busy, or holding entries not written through yet. With
 * `ifIdleSince`, also false when the session was active after that time (it was picked as idle before
 * waiting for its lock).
 */
export function unload(ctx: MemoryContext, sessionId: string, ifIdleSince?: number): Promise<boolean> {
  return ctx.mutex.run(sessionId, async () => {
    const ram = ctx.sessions.get(sessionId);
    if (!ram) return true;
    if (ram.pinnedEntries > 0 || ram.contextPins.length > 0 || ram.busy.size > 0) return false;
    if (ifIdleSince !== undefined && ram.lastActiveMs > ifIdleSince) return false;
    // Entries not written through yet exist only in the RAM context.
    if (ctx.writes.degradedReason !== undefined || ctx.writes.pendingWrites.has(sessionId)) return false;
    ctx.sessions.delete(sessionId);
    return true;
  });
}

/** Validates and appends entries in one commit, queues them for embedding, then enforces the limits. */
export async function appendBatch(
  ctx: MemoryContext,
  ref: SessionRef,
  inputs: ReadonlyArray<AppendInput>,
  also?: AlsoInTransaction,
  requireCommit = false,
): Promise<MemoryEntry[]> {
  // Before the ref is used as a key below: a malformed one is the caller's INVALID_REQUEST.
  checkRef(ref);
  const parsed = inputs.map(parseAppendInput);
  if (parsed.length === 0) return [];
  const { appendsWaiting } = ctx;
  let waiting = true;
  const started = () => {
    if (!waiting) return;
    waiting = false;
    const left = (appendsWaiting.get(ref.sessionId) ?? 1) - 1;
    if (left > 0) appendsWaiting.set(ref.sessionId, left);
    else appendsWaiting.delete(ref.sessionId);
  };
  appendsWaiting.set(ref.sessionId, (appendsWaiting.get(ref.sessionId) ?? 0) + 1);
  try {
    return await withSession(ctx, ref, async (ram) => {
      started();
      const nowMs = ctx.clock.now();
      // What the append pushes over the limits is evicted in the append's own commit: one commit, not two.
      const incoming = parsed.map((input) => ({ role: input.role, tokens: entryTokens(input) }));
      const { victims, tokens } = victimsAfterAppend(ctx, ram, incoming);
      const eviction = victims.length > 0 ? evictionOf(ctx, ram, victims, 'limit', tokens, nowMs) : undefined;
      const written = await commit(
        ctx,
        ram,
        parsed.length + victims.length,
        (first) => [
          ...parsed.map((input, index) =>
            buildEntry(ram, input, first + index, nowMs, incoming[index]!.tokens),
          ),
          ...(eviction ? eviction.tombstones(first + parsed.length) : []),
        ],
        also,
        { requireCommit, ...(eviction ? { retire: eviction.retire } : {}) },
      );
      const entries = written.slice(0, parsed.length);
      ram.entries.push(...entries);
      ram.active?.push(...entries);
      ram.activeMessages?.push(...entries.map(modelMessage));
      if (ram.totals !== undefined)
        ram.totals = {
          count: ram.totals.count + entries.length,
          tokens: ram.totals.tokens + tokensOf(entries),
        };
      ram.lastActiveMs = nowMs;
      if (eviction) {
        evictInRam(ctx, ram, victims, written.slice(parsed.length));
        publishEvent(ctx, ram, eviction.detail);
      }
      for (const entry of entries) queueEmbedding(ctx, entry);
      await enforceLimits(ctx, ram);
      // Sessions that stay loaded grow here, not at load.
      unloadLeastRecent(ctx, ram);
      return entries.map(publicCopy);
    });
  } finally {
    started();
  }
}
