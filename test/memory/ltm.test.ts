import { describe, expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import {
  createHashingEmbedder,
  createMemoryAccess,
  createMemoryService,
  toSpiderwebMemoryEvent,
} from '../../src/memory/index.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { createManualClock } from '../../src/util/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

const dayMs = 24 * 60 * 60 * 1000;

describeEachDatabase('long-term memory', (getDb) => {
  it('recall is summary-first, previews entries, and adds archived memory on request', async () => {
    const { memory } = createHarness(getDb(), { config: { recall: { previewChars: 20 } } });
    const old = sessionRef('main', 'alpha', 'old');
    await memory.append(old, {
      role: 'user',
      content: 'archived conversation about sailing boats and harbours',
    });
    await memory.archive('old', 'reset');
    const ref = sessionRef('main', 'alpha', 'current');
    for (let index = 1; index <= 4; index++) {
      await memory.append(ref, {
        role: 'user',
        content: `entry number ${index} with a fairly long body of text`,
      });
    }
    await memory.summarize(ref, { maxEntries: 2 });

    const items = await memory.recall({ agentId: 'alpha', sessionKey: ref.sessionKey });
    expect(items.map((item) => [item.kind, item.source])).toEqual([
      ['summary', 'ram'],
      ['entry', 'ram'],
      ['entry', 'ram'],
      ['entry', 'archive'],
    ]);
    const summary = items[0]!;
    expect(Object.keys(summary).sort()).toEqual(
      [
        'address',
        'created_at_ms',
        'id',
        'kind',
        'sessionKey',
        'source',
        'source_id',
        'source_ids',
        'text',
      ].sort(),
    );
    expect(summary).toMatchObject({ kind: 'summary', id: 6, source_id: 2, source_ids: [2, 3] });
    const entry = items[1]!;
    expect(entry).toMatchObject({
      kind: 'entry',
      id: 5,
      role: 'user',
      state: 'active',
      related_to: null,
      truncated: true,
    });
    expect(entry.kind === 'entry' && entry.content.length).toBeLessThanOrEqual(21);

    const full = await memory.recall({
      agentId: 'alpha',
      sessionKey: ref.sessionKey,
      includeFull: true,
      includeArchived: false,
    });
    expect(full.map((item) => (item.kind === 'entry' ? item.state : 'summary'))).toEqual([
      'summary',
      'active',
      'active',
      'summarized',
      'summarized',
    ]);
    expect(full.some((item) => 'truncated' in item)).toBe(false);
    expect(await memory.recall({ agentId: 'alpha', sessionKey: ref.sessionKey, limit: 2 })).toHaveLength(2);
  });

  it('query filters by id, address, topic and kind, and includes tombstones', async () => {
    const { memory } = createHarness(getDb());
    const ref = sessionRef();
    await memory.append(ref, { role: 'user', content: 'I planted tomatoes in the garden' });
    await memory.append(ref, { role: 'assistant', content: 'Tomatoes like sun.' });
    await memory.append(ref, { role: 'user', content: 'The garden shed is blue' });
    await memory.evict(ref);
    const byTopic = await memory.query({ agentId: 'alpha', sessionKey: ref.sessionKey, topic: 'garden' });
    expect(byTopic.map((item) => item.id).sort()).toEqual([1, 3]);
    const phrase = await memory.query({ agentId: 'alpha', topic: 'garden shed' });
    expect(phrase.map((item) => item.id)).toEqual([3]);
    const byIds = await memory.query({ agentId: 'alpha', sessionKey: ref.sessionKey, memoryIds: [1, 4] });
    expect(byIds.map((item) => [item.id, item.kind === 'entry' ? item.state : 'summary'])).toEqual([
      [4, 'tombstone'],
      [1, 'evicted'],
    ]);
    const byAddress = await memory.query({ agentId: 'alpha', memoryIds: ['agent:alpha:main#2'] });
    expect(byAddress).toMatchObject([{ id: 2, content: 'Tomatoes like sun.', role: 'assistant' }]);
    expect(await memory.query({ agentId: 'alpha', sessionKey: ref.sessionKey, kind: 'summary' })).toEqual([]);
    expect(await memory.query({ agentId: 'beta', sessionKey: ref.sessionKey })).toEqual([]);
    await expect(memory.query({ agentId: 'alpha', memoryIds: [1] })).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
  });

  it('full-text search ranks by BM25 across the sessions of one agent only', async () => {
    const { memory } = createHarness(getDb());
    await memory.append(sessionRef('a'), {
      role: 'user',
      content: 'We adopted a golden retriever puppy named Biscuit',
    });
    await memory.append(sessionRef('b'), { role: 'user', content: 'The puppy chewed my shoes' });
    await memory.append(sessionRef('b'), {
      role: 'user',
      content: 'I went running in the park this morning',
    });
    await memory.append(sessionRef('main', 'beta'), {
      role: 'user',
      content: 'Biscuit the puppy belongs to another agent',
    });
    const hits = await memory.search({ agentId: 'alpha', query: 'What is the name of the puppy Biscuit?' });
    // b#2 holds none of the words: it follows b#1, so it ranks through its neighbour, below both matches.
    expect(hits.map((hit) => hit.address)).toEqual(['agent:alpha:a#1', 'agent:alpha:b#1', 'agent:alpha:b#2']);
    expect(hits[0]!.score).toBeGreaterThan(hits[1]!.score);
    expect(hits[1]!.score).toBeGreaterThan(hits[2]!.score);
    expect(hits[0]).toMatchObject({
      mode: 'fts',
      source: 'ram',
      kind: 'entry',
      role: 'user',
      sessionKey: 'agent:alpha:a',
    });
    // Stemming: "running" matches "run"; the turn before it follows through its neighbour.
    expect((await memory.search({ agentId: 'alpha', query: 'run' })).map((hit) => hit.address)).toEqual([
      'agent:alpha:b#2',
      'agent:alpha:b#1',
    ]);
    expect(await memory.search({ agentId: 'alpha', query: '!!!' })).toEqual([]);
    expect(
      (await memory.search({ agentId: 'alpha', query: 'puppy', sessionKey: 'agent:alpha:b' })).map(
        (hit) => hit.address,
      ),
    ).toEqual(['agent:alpha:b#1', 'agent:alpha:b#2']);
  });

  it('hybrid search fuses BM25 with vectors from the hashing embedder', async () => {
    const { memory } = createHarness(getDb(), { embedder: createHashingEmbedder({ dimensions: 128 }) });
    const ref = sessionRef();
    await memory.append(ref, { role: 'user', content: 'I love photography and landscapes' });
    await memory.append(ref, { role: 'user', content: 'Dinner was pasta with basil' });
    await memory.flushEmbeddings();
    const fts = await memory.search({ agentId: 'alpha', query: 'photos', mode: 'fts' });
    expect(fts).toEqual([]);
    const hybrid = await memory.search({ agentId: 'alpha', query: 'photos' });
    expect(hybrid[0]).toMatchObject({ address: 'agent:alpha:main#1', mode: 'hybrid' });
    expect(memory.status()).toMatchObject({ searchMode: 'hybrid', embeddingModel: 'hash-128' });
    // Entries written before a restart get their vectors through the backfill.
    const restarted = createHarness(getDb(), { embedder: createHashingEmbedder({ dimensions: 64 }) });
    expect(await restarted.memory.backfillEmbeddings()).toBe(2);
    expect((await restarted.memory.search({ agentId: 'alpha', query: 'photos' }))[0]?.memoryId).toBe(1);
  });

  it('history pages user and assistant entries, current instance unless asked for archived', async () => {
    const { memory } = createHarness(getDb());
    const old = sessionRef('main', 'alpha', 'old');
    await memory.append(old, { role: 'user', content: 'before reset' });
    await memory.archive('old', 'reset');
    const ref = sessionRef('main', 'alpha', 'new');
    await memory.append(ref, { role: 'system', content: 'system note' });
    for (let index = 1; index <= 5; index++)
      await memory.append(ref, { role: index % 2 ? 'user' : 'assistant', content: `m${index}` });
    const latest = await memory.history(ref.sessionKey, { limit: 3 });
    expect(latest.map((entry) => entry.content)).toEqual(['m3', 'm4', 'm5']);
    expect(latest[0]).toMatchObject({
      memoryId: 5,
      address: 'agent:alpha:main#5',
      role: 'user',
      sessionId: 'new',
      archived: false,
    });
    const earlier = await memory.history(ref.sessionKey, { limit: 10, beforeMemoryId: latest[0]!.memoryId });
    expect(earlier.map((entry) => entry.content)).toEqual(['m1', 'm2']);
    const all = await memory.history(ref.sessionKey, { includeArchived: true });
    expect(all[0]).toMatchObject({ content: 'before reset', archived: true });
  });

  it('recallForPrompt brings back relevant memories that are not in the context', async () => {
    const { memory } = createHarness(getDb(), { config: { maxActiveEntries: 2, evictDownToRatio: 1 } });
    const ref = sessionRef();
    await memory.append(ref, { role: 'user', content: 'My sister Ana lives in Lisbon' });
    await memory.append(ref, { role: 'user', content: 'I like jazz' });
    await memory.append(ref, { role: 'user', content: 'Where does Ana live again? Lisbon?' });
    const block = await memory.recallForPrompt({
      agentId: 'alpha',
      sessionKey: ref.sessionKey,
      query: 'Where does Ana live?',
    });
    expect(block).toContain('[agent:alpha:main#1, 2023-11-14] user: My sister Ana lives in Lisbon');
    expect(block).not.toContain('#3');
    expect(
      await memory.recallForPrompt({
        agentId: 'alpha',
        sessionKey: ref.sessionKey,
        query: 'Where does Ana live?',
        maxTokens: 10,
      }),
    ).toBe('');
  });

  it('memory access serves the memory_search and memory_get tools', async () => {
    const { memory } = createHarness(getDb());
    const ref = sessionRef();
    await memory.append(ref, { role: 'user', content: 'The wifi password is on the fridge' });
    await memory.evict(ref, { count: 1 }).catch(() => undefined);
    const access = createMemoryAccess(memory);
    const found = await access.search({ agentId: 'alpha', query: 'wifi password', limit: 5 });
    expect(found).toEqual([
      {
        id: 'agent:alpha:main#1',
        content: 'The wifi password is on the fridge',
        score: expect.any(Number),
        sessionKey: 'agent:alpha:main',
        createdAt: 1_700_000_000_000,
      },
    ]);
    expect(await access.get('agent:alpha:main#1')).toEqual({
      id: 'agent:alpha:main#1',
      content: 'The wifi password is on the fridge',
      role: 'user',
      createdAt: 1_700_000_000_000,
    });
    expect(await access.get('agent:alpha:main#99')).toBeUndefined();
    expect(await access.get('not an address')).toBeUndefined();
  });

  it('persists memory events and snapshots, and applies retention by count and age', async () => {
    const clock = createManualClock();
    const { memory, events } = createHarness(getDb(), {
      clock,
      config: {
        retention: {
          snapshotsPerSession: 2,
          snapshotMaxAgeMs: 10 * dayMs,
          eventMaxAgeMs: 10 * dayMs,
          archivedMaxAgeMs: 5 * dayMs,
        },
      },
    });
    const ref = sessionRef('main', 'alpha', 'first');
    const countSnapshots = async () =>
      Number((await getDb().all<{ n: number }>('SELECT count(*) AS n FROM memory_snapshots'))[0]!.n);
    await memory.append(ref, { role: 'user', content: 'hello' });
    for (let index = 0; index < 4; index++) await memory.snapshot(ref, `manual ${index}`);
    expect(events.filter((event) => event.kind === 'snapshot')).toHaveLength(4);
    expect((await memory.applyRetention()).snapshotsDeleted).toBe(2);
    expect(await countSnapshots()).toBe(2);
    await memory.archive('first', 'reset');
    clock.advance(6 * dayMs);
    const current = sessionRef('main', 'alpha', 'second');
    await memory.append(current, { role: 'user', content: 'fresh' });
    await memory.snapshot(current, 'recent');
    const result = await memory.applyRetention();
    expect(result).toMatchObject({ archivedSessionsDeleted: 1, entriesDeleted: 1 });
    expect(
      (await memory.history(current.sessionKey, { includeArchived: true })).map((entry) => entry.content),
    ).toEqual(['fresh']);
    expect(await countSnapshots()).toBe(1);
    clock.advance(5 * dayMs);
    expect((await memory.applyRetention()).eventsDeleted).toBeGreaterThan(0);
    expect(await countSnapshots()).toBe(1);
    clock.advance(6 * dayMs);
    expect((await memory.applyRetention()).snapshotsDeleted).toBe(1);
    expect(await countSnapshots()).toBe(0);
  });

  it('maps memory events to the Spiderweb memory.event message', async () => {
    const { memory, events } = createHarness(getDb(), {
      config: { maxActiveEntries: 2, evictDownToRatio: 1 },
    });
    const ref = sessionRef();
    for (const content of ['a', 'b', 'c']) await memory.append(ref, { role: 'user', content });
    expect(toSpiderwebMemoryEvent(events.at(-1)!, 'req-1')).toEqual({
      type: 'memory.event',
      request: 'req-1',
      sessionKey: 'agent:alpha:main',
      event: 'evict',
      status: 'evicted',
      count: 1,
      message: 'evicted 1 oldest entries (#1) to long-term memory',
      tokensBefore: 15,
      tokensAfter: 10,
      memoryIds: [1],
    });
  });
});

function failingWrites(db: SqlDatabase): SqlDatabase {
  const fail = async () => {
    throw new Error('disk I/O error');
  };
  return {
    ...db,
    dialect: db.dialect,
    location: db.location,
    persistent: db.persistent,
    run: fail,
    transaction: fail,
    all: fail,
    get: fail,
    close: () => db.close(),
  };
}

describeEachDatabase('memory failure modes', (getDb) => {
  it('continues in RAM only with explicit error events when the database fails', async () => {
    const bus = createBus();
    const seen: string[] = [];
    bus.subscribe({ types: ['memory:degraded', 'system:error'] }, (event) => seen.push(event.type));
    const memory = createMemoryService({ db: failingWrites(getDb()), bus, clock: createManualClock() });
    const ref = sessionRef();
    const first = await memory.append(ref, { role: 'user', content: 'kept in RAM' });
    const second = await memory.append(ref, { role: 'assistant', content: 'still answering' });
    expect([first.memoryId, second.memoryId]).toEqual([1, 2]);
    expect(seen).toEqual(['memory:degraded', 'system:error']);
    expect(memory.status()).toMatchObject({ degraded: true });
    expect((await memory.load(ref)).map((entry) => entry.content)).toEqual([
      'kept in RAM',
      'still answering',
    ]);
    expect((await memory.search({ agentId: 'alpha', query: 'RAM' })).map((hit) => hit.memoryId)).toEqual([1]);
    expect((await memory.history(ref.sessionKey)).map((entry) => entry.memoryId)).toEqual([1, 2]);
    expect((await memory.recall({ agentId: 'alpha' })).length).toBe(2);
    expect(await memory.summarize(ref, { maxEntries: 1 })).toMatchObject({
      method: 'extractive',
      summarizedIds: [1],
    });
  });
});

describe('memory config', () => {
  it('rejects unknown keys and fills defaults', async () => {
    const { memoryConfigSchema } = await import('../../src/memory/index.js');
    expect(memoryConfigSchema.parse({})).toMatchObject({
      maxActiveEntries: 64,
      embeddings: { provider: 'none' },
      retention: { snapshotsPerSession: 24 },
    });
    expect(() => memoryConfigSchema.parse({ maxActiveEntrys: 3 })).toThrow();
  });
});
