import { describe, expect, it } from 'vitest';
import { toModelMessages } from '../../src/memory/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { countingModel, createHarness, failingModel, sessionRef } from './memory-fixtures.js';

describeEachDatabase('memory RAM model', (getDb) => {
  it('gives every entry a stable per-key MemoryID and a global address', async () => {
    const { memory } = createHarness(getDb());
    const ref = sessionRef();
    const first = await memory.append(ref, { role: 'user', content: 'hello' });
    const second = await memory.append(ref, { role: 'assistant', content: 'hi there' });
    const third = await memory.append(ref, { role: 'system', content: 'note' });
    expect([first.memoryId, second.memoryId, third.memoryId]).toEqual([1, 2, 3]);
    expect(second.address).toBe('agent:alpha:main#2');
    const other = await memory.append(sessionRef('other'), { role: 'user', content: 'separate counter' });
    expect(other.memoryId).toBe(1);
    expect((await memory.load(ref)).map((entry) => entry.memoryId)).toEqual([1, 2, 3]);
  });

  it('continues ids across an archive and never reuses them for the same key', async () => {
    const { memory } = createHarness(getDb());
    const before = sessionRef('main', 'alpha', 'instance-1');
    await memory.append(before, { role: 'user', content: 'one' });
    await memory.append(before, { role: 'assistant', content: 'two' });
    const archived = await memory.archive('instance-1', 'reset');
    expect(archived).toMatchObject({ archived: true, sessionKey: 'agent:alpha:main' });
    await expect(memory.append(before, { role: 'user', content: 'late' })).rejects.toMatchObject({
      code: 'CONFLICT',
    });
    const after = sessionRef('main', 'alpha', 'instance-2');
    const next = await memory.append(after, { role: 'user', content: 'three' });
    // The archive's snapshot takes no id; the new instance continues the key's counter.
    expect(next.memoryId).toBe(3);
    expect(await memory.load(after)).toHaveLength(1);
    await memory.deleteSessionKey('agent:alpha:main');
    const recreated = await memory.append(sessionRef('main', 'alpha', 'instance-3'), {
      role: 'user',
      content: 'four',
    });
    expect(recreated.memoryId).toBe(4);
  });

  it('LOAD returns active entries only; EVICT leaves a tombstone related to the original', async () => {
    const { memory, events } = createHarness(getDb());
    const ref = sessionRef();
    for (const content of ['a', 'b', 'c']) await memory.append(ref, { role: 'user', content });
    const evicted = await memory.evict(ref, { count: 1 });
    expect(evicted).toEqual([1]);
    const loaded = await memory.load(ref);
    expect(loaded.map((entry) => entry.content)).toEqual(['b', 'c']);
    expect(loaded.every((entry) => entry.state === 'active')).toBe(true);
    const items = await memory.query({ agentId: 'alpha', sessionKey: ref.sessionKey, kind: 'entry' });
    const tombstone = items.find((item) => item.kind === 'entry' && item.state === 'tombstone');
    expect(tombstone).toMatchObject({ kind: 'entry', source: 'ram', role: 'system', related_to: 1, id: 4 });
    const original = items.find((item) => item.id === 1);
    expect(original).toMatchObject({ state: 'evicted', source: 'ltm', content: 'a' });
    expect(events.at(-1)).toMatchObject({ kind: 'evicted', count: 1, memoryIds: [1] });
  });

  it('enforces entry and token limits without counting tombstones', async () => {
    const { memory } = createHarness(getDb(), {
      config: { maxActiveEntries: 4, evictDownToRatio: 1, maxActiveTokens: 10_000, maxRamTombstones: 3 },
    });
    const ref = sessionRef();
    for (let index = 1; index <= 20; index++)
      await memory.append(ref, { role: 'user', content: `message ${index}` });
    const loaded = await memory.load(ref);
    expect(loaded.map((entry) => entry.content)).toEqual([
      'message 17',
      'message 18',
      'message 19',
      'message 20',
    ]);
    const stats = await memory.stats(ref);
    expect(stats).toMatchObject({ activeEntries: 4, tombstones: 3 });

    const tokens = createHarness(getDb(), {
      config: { maxActiveEntries: 64, evictDownToRatio: 1, maxActiveTokens: 100 },
    });
    const small = sessionRef('tokens');
    for (let index = 0; index < 6; index++)
      await tokens.memory.append(small, { role: 'user', content: 'x'.repeat(120) });
    const kept = await tokens.memory.load(small);
    expect(kept.reduce((sum, entry) => sum + entry.tokens, 0)).toBeLessThanOrEqual(100);
    expect(kept.length).toBe(2);
    // A single entry larger than the limit is kept: the newest entry is never evicted.
    await tokens.memory.append(small, { role: 'user', content: 'y'.repeat(1_000) });
    expect((await tokens.memory.load(small)).map((entry) => entry.content[0])).toEqual(['y']);
  });

  it('round-trips tool calls and never separates a tool call from its results', async () => {
    const { memory } = createHarness(getDb(), { config: { maxActiveEntries: 3, evictDownToRatio: 1 } });
    const ref = sessionRef();
    await memory.append(ref, { role: 'user', content: 'weather?' });
    await memory.appendBatch(ref, [
      {
        role: 'assistant',
        content: '',
        toolCalls: [{ id: 'call_1', name: 'weather', arguments: { city: 'Oslo' } }],
      },
      { role: 'tool', content: '{"c":3}', toolCallId: 'call_1', toolName: 'weather' },
    ]);
    const loaded = await memory.load(ref);
    expect(toModelMessages(loaded)).toEqual([
      { role: 'user', content: 'weather?' },
      {
        role: 'assistant',
        content: '',
        toolCalls: [{ id: 'call_1', name: 'weather', arguments: { city: 'Oslo' } }],
      },
      { role: 'tool', toolCallId: 'call_1', toolName: 'weather', content: '{"c":3}' },
    ]);
    await memory.append(ref, { role: 'assistant', content: 'It is 3 degrees.' });
    // Over the limit by one: the user entry goes. Next time, the call and its result go together.
    expect((await memory.load(ref)).map((entry) => entry.role)).toEqual(['assistant', 'tool', 'assistant']);
    await memory.append(ref, { role: 'user', content: 'thanks' });
    const messages = toModelMessages(await memory.load(ref));
    expect(messages.map((message) => message.role)).toEqual(['assistant', 'user']);
  });

  it('gives the model one frozen message per pinned entry, turn after turn, and a new one for a new entry', async () => {
    const { memory } = createHarness(getDb());
    const ref = sessionRef();
    await memory.append(ref, { role: 'user', content: 'first' });
    await memory.append(ref, {
      role: 'assistant',
      content: '',
      toolCalls: [{ id: 'call_1', name: 'weather', arguments: { city: 'Oslo' } }],
    });
    await memory.append(ref, { role: 'tool', content: '{"c":3}', toolCallId: 'call_1', toolName: 'weather' });
    const lease = await memory.pin(ref);
    const messages = lease.modelMessages();
    // The same conversation as the public helper builds from the entries.
    expect(messages).toEqual(toModelMessages(lease.entries));
    lease.release();
    await memory.append(ref, { role: 'user', content: 'second' });
    const next = await memory.pin(ref);
    const nextMessages = next.modelMessages();
    next.release();
    expect(nextMessages.map((message) => message.content)).toEqual(['first', '', '{"c":3}', 'second']);
    expect(nextMessages.slice(0, 3)).toEqual(messages);
    for (const [index, message] of messages.entries()) expect(nextMessages[index]).toBe(message);
    expect(Object.isFrozen(nextMessages[3])).toBe(true);
    expect(() => {
      (nextMessages[0] as { content: string }).content = 'changed';
    }).toThrow(TypeError);
    // The caller owns the array: adding to it changes no later lease's.
    nextMessages.push({ role: 'user', content: 'extra' });
    const third = await memory.pin(ref);
    expect(third.modelMessages()).toHaveLength(4);
    third.release();
  });

  it('a lease tells what it pinned, read before or after an eviction, and the next pin what the eviction left', async () => {
    const { memory } = createHarness(getDb(), { config: { maxActiveEntries: 3, evictDownToRatio: 1 } });
    const ref = sessionRef();
    for (const content of ['one', 'two', 'three']) await memory.append(ref, { role: 'user', content });
    const contents = async () => {
      const lease = await memory.pin(ref);
      lease.release();
      return {
        messages: lease.modelMessages().map((message) => message.content),
        entries: lease.entries.map((entry) => entry.content),
        memoryIds: lease.memoryIds,
        lease,
      };
    };
    const before = await contents();
    expect(before).toMatchObject({ messages: ['one', 'two', 'three'], memoryIds: [1, 2, 3] });
    // A fourth entry evicts the first in the append's commit.
    await memory.append(ref, { role: 'user', content: 'four' });
    const after = await contents();
    expect(after.messages).toEqual(['two', 'three', 'four']);
    expect(after.entries).toEqual(['two', 'three', 'four']);
    expect(after.memoryIds).toEqual([2, 3, 4]);
    // The earlier lease still tells what it pinned.
    expect(before.lease.modelMessages().map((message) => message.content)).toEqual(['one', 'two', 'three']);
    // A lease's entries and ids are made when read: read after an eviction, they are still what it pinned.
    const held = await memory.pin(ref);
    held.release();
    await memory.append(ref, { role: 'user', content: 'five' });
    expect(held.memoryIds).toEqual([2, 3, 4]);
    expect(held.entries.map((entry) => entry.content)).toEqual(['two', 'three', 'four']);
  });

  it('rejects malformed input and mismatched session references', async () => {
    const { memory } = createHarness(getDb());
    await expect(memory.append(sessionRef(), { role: 'robot', content: 'x' } as never)).rejects.toMatchObject(
      { code: 'INVALID_REQUEST' },
    );
    await expect(
      memory.append(
        { sessionId: 's', sessionKey: 'agent:beta:main', agentId: 'alpha' },
        { role: 'user', content: 'x' },
      ),
    ).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
    await expect(
      memory.append({ sessionId: 's', sessionKey: 'main', agentId: 'alpha' }, { role: 'user', content: 'x' }),
    ).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
  });

  it('summarizes with the model and replaces the oldest entries by a summary and tombstones', async () => {
    const model = countingModel();
    const { memory, events } = createHarness(getDb(), { model });
    const ref = sessionRef();
    for (let index = 1; index <= 6; index++)
      await memory.append(ref, { role: index % 2 ? 'user' : 'assistant', content: `turn ${index}` });
    const result = await memory.summarize(ref, { maxEntries: 4 });
    expect(result.method).toBe('model');
    expect(result.summarizedIds).toEqual([1, 2, 3, 4]);
    expect(model.requests[0]).toMatchObject({ purpose: 'summarize' });
    const loaded = await memory.load(ref);
    expect(loaded.map((entry) => [entry.kind, entry.content])).toEqual([
      ['summary', 'summary of 4 lines'],
      ['entry', 'turn 5'],
      ['entry', 'turn 6'],
    ]);
    expect(loaded[0]).toMatchObject({ memoryId: 7, sourceIds: [1, 2, 3, 4], role: 'system' });
    const tombstones = (
      await memory.query({ agentId: 'alpha', sessionKey: ref.sessionKey, kind: 'entry', limit: 50 })
    ).filter((item) => item.kind === 'entry' && item.state === 'tombstone');
    expect(tombstones.map((item) => (item.kind === 'entry' ? item.related_to : null)).sort()).toEqual([
      1, 2, 3, 4,
    ]);
    expect(events.at(-1)).toMatchObject({ kind: 'summarized', count: 4, memoryIds: [1, 2, 3, 4] });
    expect(events.at(-1)!.tokensAfter).toBeLessThan(events.at(-1)!.tokensBefore);
  });

  it('falls back to an extractive summary when the model fails', async () => {
    const model = failingModel();
    const { memory, events } = createHarness(getDb(), { model });
    const ref = sessionRef();
    await memory.append(ref, { role: 'user', content: 'My cat is called Miso. She is nine.' });
    await memory.append(ref, { role: 'assistant', content: 'Miso sounds lovely!' });
    await memory.append(ref, { role: 'user', content: 'latest' });
    const result = await memory.summarize(ref, { maxEntries: 2 });
    expect(model.calls).toBeGreaterThan(0);
    expect(result.method).toBe('extractive');
    expect(result.summary?.content).toBe('user: My cat is called Miso.\nassistant: Miso sounds lovely!');
    expect(events.at(-1)?.message).toContain('extractively');
  });

  it('keeps every update when many writers append while summaries run', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const { memory } = createHarness(getDb(), {
      model: countingModel(gate),
      config: { maxActiveEntries: 40, evictDownToRatio: 1, summarizeBatch: 5 },
    });
    const ref = sessionRef();
    for (let index = 0; index < 10; index++)
      await memory.append(ref, { role: 'user', content: `seed ${index}` });
    const writers = Array.from({ length: 120 }, (_, index) =>
      memory.append(ref, { role: 'user', content: `concurrent ${index}` }),
    );
    const summaries = [memory.summarize(ref), memory.summarize(ref), memory.summarize(ref)];
    open();
    const appended = await Promise.all(writers);
    const results = await Promise.all(summaries);
    const ids = appended.map((entry) => entry.memoryId);
    expect(new Set(ids).size).toBe(120);
    // FIFO: writers got ids in call order.
    expect(ids).toEqual([...ids].sort((left, right) => left - right));
    expect(results.filter((result) => result.summarizedIds.length > 0).length).toBeGreaterThanOrEqual(1);
    // Every appended entry is stored exactly once: still active, or moved to long-term memory.
    const stored = await memory.query({
      agentId: 'alpha',
      memoryIds: appended.map((entry) => entry.address),
      kind: 'entry',
      limit: 128,
    });
    expect(stored).toHaveLength(120);
    const active = new Set((await memory.load(ref)).map((entry) => entry.memoryId));
    for (const item of stored) {
      if (item.kind !== 'entry') throw new Error('expected entries');
      expect(item.content).toBe(`concurrent ${ids.indexOf(item.id)}`);
      expect(item.state === 'active').toBe(active.has(item.id));
      expect(['active', 'summarized', 'evicted']).toContain(item.state);
    }
    const stats = await memory.stats(ref);
    expect(stats.activeEntries).toBeLessThanOrEqual(40);
    const memoryIds = (await memory.load(ref)).map((entry) => entry.memoryId);
    expect(new Set(memoryIds).size).toBe(memoryIds.length);
  });

  it("gives pins frozen copies of an entry's metadata and tool-call arguments, and loads copies of their own", async () => {
    const { memory } = createHarness(getDb());
    const ref = sessionRef();
    await memory.append(ref, { role: 'user', content: 'look it up', metadata: { runId: 'run-1' } });
    await memory.append(ref, {
      role: 'assistant',
      content: '',
      toolCalls: [{ id: 'call-1', name: 'lookup', arguments: { query: 'tide pools' } }],
      metadata: { runId: 'run-1' },
    });
    const lease = await memory.pin(ref);
    const [user, assistant] = lease.entries;
    expect(Object.isFrozen(user!.metadata)).toBe(true);
    expect(Object.isFrozen(assistant!.toolCalls![0]!.arguments)).toBe(true);
    expect(() => {
      (user!.metadata as Record<string, unknown>).runId = 'changed';
    }).toThrow(TypeError);
    lease.release();
    // What a load hands out is the caller's to change, and changes nothing in memory.
    const loaded = await memory.load(ref);
    (loaded[0]!.metadata as Record<string, unknown>).runId = 'changed';
    (loaded[1]!.toolCalls![0]!.arguments as Record<string, unknown>).query = 'changed';
    const reloaded = await memory.load(ref);
    expect(reloaded[0]!.metadata).toEqual({ runId: 'run-1' });
    expect(reloaded[1]!.toolCalls![0]!.arguments).toEqual({ query: 'tide pools' });
    expect((await memory.pin(ref)).entries[0]!.metadata).toEqual({ runId: 'run-1' });
  });

  it('never evicts or summarizes pinned entries, and enforces limits once released', async () => {
    const { memory } = createHarness(getDb(), { config: { maxActiveEntries: 3, evictDownToRatio: 1 } });
    const ref = sessionRef();
    for (const content of ['a', 'b', 'c']) await memory.append(ref, { role: 'user', content });
    const lease = await memory.pin(ref);
    expect(lease.memoryIds).toEqual([1, 2, 3]);
    expect(lease.entries.map((entry) => entry.content)).toEqual(['a', 'b', 'c']);
    // One frozen copy per entry, shared by the pins that hand it out: no caller changes the next turn's view.
    const again = await memory.pin(ref);
    expect(again.entries[0]).toBe(lease.entries[0]);
    expect(() => {
      (lease.entries[0] as { content: string }).content = 'changed';
    }).toThrow(TypeError);
    again.release();
    await memory.append(ref, { role: 'assistant', content: 'd' });
    expect((await memory.load(ref)).map((entry) => entry.content)).toEqual(['a', 'b', 'c', 'd']);
    expect((await memory.summarize(ref)).skipped).toBe('nothing-to-summarize');
    expect(await memory.evict(ref)).toEqual([]);
    lease.release();
    lease.release();
    expect((await memory.load(ref)).map((entry) => entry.content)).toEqual(['b', 'c', 'd']);
  });

  it('discards a summary when a turn pinned its entries while the model was writing it', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const { memory } = createHarness(getDb(), { model: countingModel(gate) });
    const ref = sessionRef();
    for (const content of ['a', 'b', 'c']) await memory.append(ref, { role: 'user', content });
    const pending = memory.summarize(ref, { maxEntries: 2 });
    const lease = await memory.pin(ref);
    open();
    expect((await pending).skipped).toBe('pinned');
    expect((await memory.load(ref)).map((entry) => entry.content)).toEqual(['a', 'b', 'c']);
    lease.release();
  });
});

describe('toModelMessages', () => {
  it('turns summaries into system context and skips anything not active', () => {
    const base = {
      sessionId: 's',
      sessionKey: 'agent:a:main',
      agentId: 'a',
      relatedTo: null,
      tokens: 1,
      createdAtMs: 1,
      archivedAtMs: null,
    };
    expect(
      toModelMessages([
        {
          ...base,
          memoryId: 1,
          address: 'agent:a:main#1',
          kind: 'summary',
          role: 'system',
          state: 'active',
          content: 'they met',
        },
        {
          ...base,
          memoryId: 2,
          address: 'agent:a:main#2',
          kind: 'entry',
          role: 'user',
          state: 'tombstone',
          content: '[evicted:1]',
        },
      ]),
    ).toEqual([{ role: 'system', content: 'Summary of earlier conversation: they met' }]);
  });
});
