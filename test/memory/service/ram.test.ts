import { describe, expect, it } from 'vitest';
import { toModelMessages } from '../../../src/memory/index.js';
import type { RamSession } from '../../../src/memory/service/context.js';
import {
  activeOf,
  appendBatch,
  buildEntry,
  enforceLimits,
  entryTokens,
  evictEntries,
  idRange,
  pickOldest,
  pinEntries,
  publicCopy,
  statsOf,
  tombstoneFor,
  unload,
  withSession,
} from '../../../src/memory/service/ram.js';
import { summarize } from '../../../src/memory/service/summarize.js';
import { countingCommits } from '../../helpers/commit-counter.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { countingModel, sessionRef } from '../memory-fixtures.js';
import { loaded, stepContext } from './helpers.js';

function ramOf(roles: Array<'user' | 'assistant-call' | 'tool' | 'assistant'>): RamSession {
  const ram: RamSession = {
    ref: sessionRef(),
    entries: [],
    totals: undefined,
    active: undefined,
    activeMessages: undefined,
    pinnedEntries: 0,
    contextPins: [],
    busy: new Set(),
    lastActiveMs: 0,
    nextId: roles.length + 1,
    storedActiveMs: undefined,
    knowsStoredActive: true,
  };
  ram.entries = roles.map((role, index) =>
    buildEntry(
      ram,
      role === 'tool'
        ? { role: 'tool', content: 'result', toolCallId: 'c1', toolName: 'read' }
        : role === 'assistant-call'
          ? { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'read', arguments: {} }] }
          : { role, content: `entry ${index + 1}` },
      index + 1,
      1_000,
    ),
  );
  return ram;
}

describe('memory RAM context: entries', () => {
  it('picks whole tool-call groups from the front and stops at a pinned or busy entry', () => {
    const ram = ramOf(['user', 'assistant-call', 'tool', 'tool', 'assistant', 'user']);
    const ids = (entries: Array<{ memoryId: number }>) => entries.map((entry) => entry.memoryId);
    expect(ids(pickOldest(ram, (count) => count < 2, 1))).toEqual([1, 2, 3, 4]);
    expect(ids(pickOldest(ram, () => true, 2))).toEqual([1, 2, 3, 4]);
    expect(ids(pickOldest(ram, () => true, 3))).toEqual([1]);
    ram.busy.add(2);
    expect(ids(pickOldest(ram, () => true, 1))).toEqual([1]);
    ram.busy.clear();
    ram.entries[0]!.pins = 1;
    expect(pickOldest(ram, () => true, 1)).toEqual([]);
  });

  it('counts tokens from text and tool calls, names id ranges, and copies entries deeply', () => {
    expect(entryTokens({ content: 'abcdefgh' })).toBe(6);
    expect(entryTokens({ content: '', toolCalls: [{ name: 'ab', arguments: { a: 1 } }] })).toBe(7);
    expect([idRange([]), idRange([3]), idRange([3, 4, 5])]).toEqual(['', '#3', '#3–#5']);
    const ram = ramOf(['assistant-call']);
    const entry = ram.entries[0]!;
    const copy = publicCopy(entry);
    copy.toolCalls![0]!.arguments.injected = true;
    expect(entry.toolCalls![0]!.arguments).toEqual({});
    expect(copy).not.toHaveProperty('rowId');
    const tombstone = tombstoneFor(ram, 9, entry, '[evicted:1]', {}, 2_000);
    expect(tombstone).toMatchObject({
      state: 'tombstone',
      tokens: 0,
      relatedTo: 1,
      orderKey: entry.orderKey,
    });
    expect(statsOf(ram)).toMatchObject({ activeEntries: 1, tombstones: 0, nextMemoryId: 2 });
  });
});

describeEachDatabase('memory RAM context', (getDb) => {
  /** Two entries appended and pinned by a lease, then a third appended past a limit of two. */
  async function pinnedPastTheLimit(ctx: ReturnType<typeof stepContext>['ctx']) {
    const ref = sessionRef();
    await appendBatch(ctx, ref, [
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'two' },
    ]);
    const lease = await withSession(ctx, ref, async (ram) => pinEntries(ctx, ram));
    await appendBatch(ctx, ref, [{ role: 'user', content: 'three' }]);
    return { ref, lease };
  }

  it('keeps the newest tombstones in context order, one over the cap or many', async () => {
    const { ctx } = stepContext(getDb(), {
      config: { maxActiveEntries: 4, evictDownToRatio: 1, maxActiveTokens: 10_000, maxRamTombstones: 3 },
    });
    const ref = sessionRef();
    const context = async () =>
      (await loaded(ctx)).entries.map((entry) =>
        entry.state === 'tombstone' ? `#${entry.memoryId}>${entry.relatedTo}` : entry.content,
      );
    // Each append past four evicts the oldest entry in the same commit, which adds one tombstone: the
    // RAM context keeps the newest three of them, each where its entry was.
    for (let index = 1; index <= 9; index++)
      await appendBatch(ctx, ref, [{ role: 'user', content: `m${index}` }]);
    expect(await context()).toEqual(['#10>3', '#12>4', '#14>5', 'm6', 'm7', 'm8', 'm9']);
    // Three evicted at once push the three older tombstones out together.
    const ram = await loaded(ctx);
    await ctx.mutex.run(ref.sessionId, () => evictEntries(ctx, ram, ram.entries.slice(3, 6), 'test'));
    expect(await context()).toEqual(['#15>7', '#16>9', '#17>11', 'm9']);
  });

  it('appends under the session lock, evicts over the limit, and reloads the same context', async () => {
    const { ctx, events } = stepContext(getDb(), { config: { maxActiveEntries: 2, evictDownToRatio: 1 } });
    const ref = sessionRef();
    const written = await appendBatch(ctx, ref, [
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'two' },
      { role: 'user', content: 'three' },
    ]);
    expect(written.map((entry) => entry.memoryId)).toEqual([1, 2, 3]);
    const ram = await loaded(ctx);
    expect(statsOf(ram)).toMatchObject({ activeEntries: 2, tombstones: 1, nextMemoryId: 5 });
    expect(events.at(-1)).toMatchObject({ type: 'memory:event', data: { kind: 'evicted', memoryIds: [1] } });
    // A fresh context (a restart) restores the same active entries from the database.
    const restarted = stepContext(getDb(), { config: { maxActiveEntries: 2, evictDownToRatio: 1 } });
    const reloaded = await loaded(restarted.ctx);
    expect(
      reloaded.entries.filter((entry) => entry.state === 'active').map((entry) => entry.memoryId),
    ).toEqual([2, 3]);
    expect(restarted.events[0]).toMatchObject({ data: { kind: 'restored', count: 2 } });
  });

  it('evicts down to evictDownToRatio of the limits once one is passed, then appends without evicting', async () => {
    const { ctx, events } = stepContext(getDb(), {
      config: { maxActiveEntries: 8, evictDownToRatio: 0.5 },
    });
    const ref = sessionRef();
    const evictions = () => events.filter((event) => (event.data as { kind?: string }).kind === 'evicted');
    for (let turn = 1; turn <= 8; turn++)
      await appendBatch(ctx, ref, [{ role: 'user', content: `m${turn}` }]);
    expect(evictions()).toHaveLength(0);
    // The ninth entry passes the limit of 8: the oldest go until 4 (half of it) are active, in one eviction.
    await appendBatch(ctx, ref, [{ role: 'user', content: 'm9' }]);
    expect(evictions()).toHaveLength(1);
    expect(evictions()[0]).toMatchObject({ data: { memoryIds: [1, 2, 3, 4, 5], count: 5 } });
    expect(statsOf(await loaded(ctx))).toMatchObject({ activeEntries: 4, tombstones: 5 });
    // Room for four more before the next eviction.
    for (let turn = 10; turn <= 13; turn++)
      await appendBatch(ctx, ref, [{ role: 'user', content: `m${turn}` }]);
    expect(evictions()).toHaveLength(1);
    expect(statsOf(await loaded(ctx))).toMatchObject({ activeEntries: 8 });
    await appendBatch(ctx, ref, [{ role: 'user', content: 'm14' }]);
    expect(evictions()).toHaveLength(2);
    // The token limit works the same way: entries of 10 estimated tokens, a limit of 100, down to 50.
    const tokens = stepContext(getDb(), {
      config: { maxActiveEntries: 64, maxActiveTokens: 100, evictDownToRatio: 0.5 },
    });
    const tokenRef = sessionRef('tokens');
    const tokenEntry = { role: 'user' as const, content: 'x'.repeat(24) };
    expect(entryTokens(tokenEntry)).toBe(10);
    for (let turn = 1; turn <= 10; turn++) await appendBatch(tokens.ctx, tokenRef, [tokenEntry]);
    expect(statsOf(await loaded(tokens.ctx, 'tokens'))).toMatchObject({
      activeEntries: 10,
      activeTokens: 100,
    });
    await appendBatch(tokens.ctx, tokenRef, [tokenEntry]);
    expect(statsOf(await loaded(tokens.ctx, 'tokens'))).toMatchObject({
      activeEntries: 5,
      activeTokens: 50,
    });
  });

  it('refuses bad input and a session id reused by another key', async () => {
    const { ctx } = stepContext(getDb());
    await expect(
      appendBatch(ctx, sessionRef(), [{ role: 'robot', content: 'x' } as never]),
    ).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
    // Checked before the session lock is taken: the call throws at once.
    expect(() =>
      withSession(ctx, { ...sessionRef(), sessionKey: 'agent:other:main' }, async () => 1),
    ).toThrow('sessionKey names another agent');
    await appendBatch(ctx, sessionRef('a', 'alpha', 'shared'), [{ role: 'user', content: 'x' }]);
    await expect(
      appendBatch(ctx, sessionRef('b', 'alpha', 'shared'), [{ role: 'user', content: 'y' }]),
    ).rejects.toMatchObject({ code: 'CONFLICT' });
  });

  it("evicts what an append pushes over the limits in the append's own commit", async () => {
    const db = getDb();
    const commits = countingCommits(db);
    const { ctx, events } = stepContext(commits.db, { config: { maxActiveEntries: 2, evictDownToRatio: 1 } });
    const ref = sessionRef();
    await appendBatch(ctx, ref, [
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'two' },
    ]);
    const before = commits.count();
    const [third] = await appendBatch(ctx, ref, [{ role: 'user', content: 'three' }]);
    expect(commits.count() - before).toBe(1);
    expect(third).toMatchObject({ memoryId: 3, content: 'three' });
    const ram = await loaded(ctx);
    expect(statsOf(ram)).toMatchObject({ activeEntries: 2, tombstones: 1, nextMemoryId: 5 });
    expect(ram.entries.map((entry) => [entry.memoryId, entry.state, entry.content])).toEqual([
      [4, 'tombstone', '[evicted:1]'],
      [2, 'active', 'two'],
      [3, 'active', 'three'],
    ]);
    const evicted = events.find((event) => event.type === 'memory:event');
    expect(evicted?.data).toMatchObject({ kind: 'evicted', memoryIds: [1], reason: 'limit' });
    // What the database kept: the same as RAM, read back by a fresh load.
    const { ctx: fresh } = stepContext(db, { config: { maxActiveEntries: 2, evictDownToRatio: 1 } });
    expect((await loaded(fresh)).entries.map((entry) => [entry.memoryId, entry.state])).toEqual([
      [4, 'tombstone'],
      [2, 'active'],
      [3, 'active'],
    ]);
  });

  it("stores a tool result's call as JSON.stringify writes it, whatever its id and name hold", async () => {
    const db = getDb();
    const { ctx } = stepContext(db);
    const call = { toolCallId: 'c"1\\\u2028é', toolName: 'look "up"\n', isError: true };
    await appendBatch(ctx, sessionRef(), [
      { role: 'tool', content: 'failed', ...call },
      { role: 'tool', content: 'found', toolCallId: 'c2', toolName: 'read' },
    ]);
    expect(await db.all('SELECT tool_data FROM memory_entries ORDER BY memory_id')).toEqual([
      { tool_data: JSON.stringify(call) },
      { tool_data: JSON.stringify({ toolCallId: 'c2', toolName: 'read', isError: false }) },
    ]);
  });

  it("evicts in the append's own commit when the batch brings tool calls and their results", async () => {
    const db = getDb();
    const commits = countingCommits(db);
    const { ctx, events } = stepContext(commits.db, { config: { maxActiveEntries: 4, evictDownToRatio: 1 } });
    const ref = sessionRef();
    await appendBatch(ctx, ref, [
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'two' },
    ]);
    const before = commits.count();
    // A run's transcript, as `beforeFinish` appends it: a tool call, its result, the answer.
    await appendBatch(ctx, ref, [
      { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'read', arguments: {} }] },
      { role: 'tool', content: 'result', toolCallId: 'c1', toolName: 'read' },
      { role: 'assistant', content: 'done' },
    ]);
    expect(commits.count() - before).toBe(1);
    const evicted = events.filter((event) => (event.data as { kind?: string }).kind === 'evicted');
    expect(evicted.map((event) => event.data)).toMatchObject([
      { memoryIds: [1], count: 1, tokensBefore: 27 },
    ]);
    const states = (entries: RamSession['entries']) => entries.map((entry) => [entry.memoryId, entry.state]);
    const expected = [
      [6, 'tombstone'],
      [2, 'active'],
      [3, 'active'],
      [4, 'active'],
      [5, 'active'],
    ];
    expect(states((await loaded(ctx)).entries)).toEqual(expected);
    const { ctx: fresh } = stepContext(db, { config: { maxActiveEntries: 4, evictDownToRatio: 1 } });
    expect(states((await loaded(fresh)).entries)).toEqual(expected);
  });

  it('leaves an eviction that reaches a tool call to after the append when the batch starts with its results', async () => {
    const { ctx, events } = stepContext(getDb(), { config: { maxActiveEntries: 2, evictDownToRatio: 1 } });
    const ref = sessionRef();
    await appendBatch(ctx, ref, [
      { role: 'user', content: 'question' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'read', arguments: {} }] },
    ]);
    await appendBatch(ctx, ref, [
      { role: 'tool', content: 'result', toolCallId: 'c1', toolName: 'read' },
      { role: 'assistant', content: 'answer' },
    ]);
    // The call goes with its result, never without it.
    const evicted = events.filter((event) => (event.data as { kind?: string }).kind === 'evicted');
    expect(evicted.map((event) => (event.data as { memoryIds: number[] }).memoryIds)).toEqual([[1, 2, 3]]);
    expect(
      (await loaded(ctx)).entries.filter((entry) => entry.state === 'active').map((entry) => entry.content),
    ).toEqual(['answer']);
  });

  it("leaves what a released pin held off to an append queued behind it, in the append's commit", async () => {
    const db = getDb();
    const commits = countingCommits(db);
    const { ctx } = stepContext(commits.db, { config: { maxActiveEntries: 2, evictDownToRatio: 1 } });
    const { ref, lease } = await pinnedPastTheLimit(ctx);
    expect(statsOf(await loaded(ctx)).activeEntries).toBe(3);
    const before = commits.count();
    lease.release();
    await appendBatch(ctx, ref, [{ role: 'assistant', content: 'four' }]);
    expect(commits.count() - before).toBe(1);
    const ram = await loaded(ctx);
    expect(ram.entries.filter((entry) => entry.state === 'active').map((entry) => entry.content)).toEqual([
      'three',
      'four',
    ]);
    expect(ctx.appendsWaiting.has(ref.sessionId)).toBe(false);
  });

  it('pinned entries outlive the limit until released, and a pinned session does not unload', async () => {
    const { ctx } = stepContext(getDb(), { config: { maxActiveEntries: 2, evictDownToRatio: 1 } });
    const { ref, lease } = await pinnedPastTheLimit(ctx);
    expect(lease.memoryIds).toEqual([1, 2]);
    const ram = await loaded(ctx);
    expect(statsOf(ram).activeEntries).toBe(3);
    expect(await unload(ctx, ref.sessionId)).toBe(false);
    lease.release();
    lease.release();
    await ctx.mutex.run(ref.sessionId, async () => undefined);
    expect(statsOf(ram)).toMatchObject({ activeEntries: 2, pinned: 0 });
    await enforceLimits(ctx, ram);
    expect(await unload(ctx, ref.sessionId)).toBe(true);
    expect(ctx.sessions.size).toBe(0);
  });

  it('a lease of the whole context marks the session once and writes nothing on its entries', async () => {
    const { ctx } = stepContext(getDb(), { config: { maxActiveEntries: 2, evictDownToRatio: 1 } });
    const { ref, lease } = await pinnedPastTheLimit(ctx);
    const ram = await loaded(ctx);
    expect(ram.entries.map((entry) => entry.pins)).toEqual([undefined, undefined, undefined]);
    // #3 came after the lease: not pinned, yet the eviction stops at #1, the oldest.
    expect(ram.contextPins).toEqual([2]);
    expect(statsOf(ram).pinned).toBe(2);
    // A lease of chosen entries still counts on each.
    const chosen = await withSession(ctx, ref, async (session) => pinEntries(ctx, session, [3]));
    expect(ram.entries.map((entry) => entry.pins)).toEqual([undefined, undefined, 1]);
    // Its conversation is still the whole context's, as its entries are.
    expect(chosen.modelMessages()).toEqual(toModelMessages(chosen.entries));
    expect(chosen.modelMessages()).toHaveLength(3);
    expect(statsOf(ram).pinned).toBe(3);
    lease.release();
    chosen.release();
    await ctx.mutex.run(ref.sessionId, async () => undefined);
    expect(ram.contextPins).toEqual([]);
    expect(statsOf(ram)).toMatchObject({ activeEntries: 2, pinned: 0 });
  });

  it('hands out the active entries and their conversation as copies that appends, evictions and summaries keep true', async () => {
    const { ctx } = stepContext(getDb(), {
      config: { maxActiveEntries: 4, evictDownToRatio: 0.5, maxActiveTokens: 10_000 },
      model: countingModel(),
    });
    const ref = sessionRef();
    const ram = await loaded(ctx);
    const expectTrue = () => {
      const fresh = ram.entries.filter((entry) => entry.state === 'active');
      expect(activeOf(ram)).toEqual(fresh);
      // A lease's conversation is its entries', one message each, whatever the context went through.
      const lease = pinEntries(ctx, ram);
      expect(lease.modelMessages()).toEqual(toModelMessages(lease.entries));
      expect(lease.modelMessages()).toHaveLength(fresh.length);
      lease.release();
    };
    await appendBatch(ctx, ref, [
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'two' },
    ]);
    expectTrue();
    const copy = activeOf(ram);
    copy.pop();
    const lease = pinEntries(ctx, ram);
    lease.modelMessages().pop();
    expect(lease.modelMessages()).toHaveLength(2);
    lease.release();
    expectTrue();
    // Past four active entries the append evicts in its own commit.
    for (const content of ['three', 'four', 'five']) {
      await appendBatch(ctx, ref, [{ role: 'user', content }]);
      expectTrue();
    }
    expect(ram.entries.some((entry) => entry.state === 'tombstone')).toBe(true);
    await ctx.mutex.run(ref.sessionId, () => evictEntries(ctx, ram, activeOf(ram).slice(0, 1), 'test'));
    expectTrue();
    expect((await summarize(ctx, ref, { maxEntries: 2, keepLatest: 0 })).summary).toBeDefined();
    expectTrue();
    expect(activeOf(ram).some((entry) => entry.kind === 'summary')).toBe(true);
  });

  it('keeps in RAM the context a restart loads, through evictions, summaries and their tombstones', async () => {
    const config = {
      maxActiveEntries: 6,
      evictDownToRatio: 0.5,
      maxActiveTokens: 10_000,
      maxRamTombstones: 4,
    };
    const { ctx } = stepContext(getDb(), { config, model: countingModel() });
    const ref = sessionRef();
    const ram = await loaded(ctx);
    const shape = (entries: ReadonlyArray<{ memoryId: number; state: string }>) =>
      entries.map((entry) => `${entry.state === 'tombstone' ? 't' : entry.state[0]}${entry.memoryId}`);
    const expectSame = async (step: string) => {
      const active = ram.entries.filter((entry) => entry.state === 'active');
      // The kept lists and totals are the context's own, as if listed again from its entries.
      expect(activeOf(ram), step).toEqual(active);
      expect(statsOf(ram), step).toMatchObject({
        activeEntries: active.length,
        activeTokens: active.reduce((sum, entry) => sum + entry.tokens, 0),
        tombstones: ram.entries.length - active.length,
      });
      const lease = pinEntries(ctx, ram);
      expect(lease.modelMessages(), step).toEqual(toModelMessages(active));
      lease.release();
      await ctx.mutex.run(ref.sessionId, async () => undefined);
      // In context order, and what a fresh process reads from the database: the same entries and tombstones.
      const ordered = [...ram.entries].sort(
        (left, right) => left.orderKey - right.orderKey || left.memoryId - right.memoryId,
      );
      expect(shape(ram.entries), step).toEqual(shape(ordered));
      const restarted = stepContext(getDb(), { config });
      expect(shape((await loaded(restarted.ctx)).entries), step).toEqual(shape(ram.entries));
    };
    const evict = (victims: ReturnType<typeof activeOf>, step: string) =>
      ctx.mutex.run(ref.sessionId, () => evictEntries(ctx, ram, victims, step)).then(() => expectSame(step));
    let turn = 0;
    const chat = async () => {
      turn++;
      const batch =
        turn % 3 === 0
          ? [
              {
                role: 'assistant' as const,
                content: '',
                toolCalls: [{ id: `c${turn}`, name: 'read', arguments: {} }],
              },
              { role: 'tool' as const, content: 'result', toolCallId: `c${turn}`, toolName: 'read' },
              { role: 'assistant' as const, content: `answer ${turn}` },
            ]
          : [
              { role: 'user' as const, content: `question ${turn}` },
              { role: 'assistant' as const, content: `answer ${turn}` },
            ];
      await appendBatch(ctx, ref, batch);
      await expectSame(`turn ${turn}`);
    };
    for (let index = 0; index < 4; index++) await chat();
    // A summary sits where its first entry was, before that entry's tombstone; evicting it puts its own
    // tombstone after that one (a higher id at the same place), which the eviction's in-place swap must sort.
    expect((await summarize(ctx, ref, { maxEntries: 2, keepLatest: 0 })).summary).toBeDefined();
    await expectSame('summary');
    const summary = activeOf(ram)[0]!;
    expect(summary.kind).toBe('summary');
    await evict([summary], 'the summary evicted');
    // Only the oldest active entries are evicted: a later one is refused before anything is written.
    const before = shape(ram.entries);
    await expect(evict(activeOf(ram).slice(1, 2), 'a later entry')).rejects.toMatchObject({
      code: 'INTERNAL',
    });
    expect(shape(ram.entries)).toEqual(before);
    await expectSame('a later entry refused');
    for (let index = 0; index < 6; index++) await chat();
    expect((await summarize(ctx, ref, { maxEntries: 3, keepLatest: 1 })).summary).toBeDefined();
    await expectSame('second summary');
    await evict(activeOf(ram).slice(0, 2), 'the front evicted');
    for (let index = 0; index < 6; index++) await chat();
    expect(ram.entries.filter((entry) => entry.state === 'tombstone')).toHaveLength(config.maxRamTombstones);
  });

  it('holds an entry while any of the leases that pinned it is unreleased', async () => {
    const { ctx } = stepContext(getDb(), { config: { maxActiveEntries: 2, evictDownToRatio: 0.5 } });
    const { ref, lease: first } = await pinnedPastTheLimit(ctx);
    // The second lease pins #1 and #2 again, and #3 for the first time.
    const second = await withSession(ctx, ref, async (ram) => pinEntries(ctx, ram));
    expect(second.memoryIds).toEqual([1, 2, 3]);
    const ram = await loaded(ctx);
    expect(statsOf(ram).pinned).toBe(3);
    first.release();
    await ctx.mutex.run(ref.sessionId, async () => undefined);
    // #1 and #2 are still the second lease's: the limit waits, and the session stays loaded.
    expect(statsOf(ram)).toMatchObject({ activeEntries: 3, pinned: 3 });
    expect(pickOldest(ram, () => true, 0)).toEqual([]);
    expect(await unload(ctx, ref.sessionId)).toBe(false);
    second.release();
    await ctx.mutex.run(ref.sessionId, async () => undefined);
    expect(statsOf(ram).pinned).toBe(0);
    expect(statsOf(ram).activeEntries).toBe(1);
    const active = ram.entries.filter((entry) => entry.state === 'active');
    expect(active.map((entry) => entry.memoryId)).toEqual([3]);
  });
});
