import { afterEach, describe, expect, it, vi } from 'vitest';
import { createAutoRecall } from '../../src/chat/auto-recall.js';
import type { SessionRef } from '../../src/memory/index.js';
import { createManualClock, silentLogger } from '../../src/util/index.js';

const ref = (name: string): SessionRef => ({
  sessionId: `s-${name}`,
  sessionKey: `agent:main:${name}`,
  agentId: 'main',
});

/** A search that takes `durationMs` of the manual clock and answers with the session and the query. */
function harness(durationMs: number, options: { refreshMs: number; maxShare: number }) {
  const clock = createManualClock(0);
  const searches: string[] = [];
  const recall = createAutoRecall({
    search: async (session, query) => {
      searches.push(`${session.sessionKey}:${query}`);
      clock.advance(durationMs);
      return `block for ${query}`;
    },
    clock,
    logger: silentLogger,
    ...options,
  });
  return { clock, searches, recall };
}

describe('automatic recall', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('searches on every turn without refreshMs', async () => {
    const { recall, searches } = harness(0, { refreshMs: 0, maxShare: 0.1 });
    expect(await recall.block(ref('a'), 'one')).toBe('block for one');
    expect(await recall.block(ref('a'), 'two')).toBe('block for two');
    expect(searches).toEqual(['agent:main:a:one', 'agent:main:a:two']);
  });

  it('forgets an ended session: its block is not kept, and another session keeps its own', async () => {
    const { recall, searches } = harness(0, { refreshMs: 1_000, maxShare: 0.1 });
    await recall.block(ref('a'), 'one');
    await recall.block(ref('b'), 'one');
    recall.forget(ref('a').sessionId);
    expect(await recall.block(ref('a'), 'one')).toBe('block for one');
    expect(await recall.block(ref('b'), 'one')).toBe('block for one');
    expect(searches).toEqual(['agent:main:a:one', 'agent:main:b:one', 'agent:main:a:one']);
  });

  it('searches for each new message, and gives a message sent again within refreshMs its first block', async () => {
    const { recall, searches, clock } = harness(0, { refreshMs: 1_000, maxShare: 0.1 });
    expect(await recall.block(ref('a'), 'hello')).toBe('block for hello');
    // A question right after a greeting gets the memories it asks about, not the greeting's.
    clock.advance(5);
    expect(await recall.block(ref('a'), 'what is my cat called?')).toBe('block for what is my cat called?');
    clock.advance(994);
    expect(await recall.block(ref('a'), 'what is my cat called?')).toBe('block for what is my cat called?');
    clock.advance(6);
    expect(await recall.block(ref('a'), 'what is my cat called?')).toBe('block for what is my cat called?');
    expect(searches).toEqual([
      'agent:main:a:hello',
      'agent:main:a:what is my cat called?',
      'agent:main:a:what is my cat called?',
    ]);
    // A long message is not kept to be compared: sent again, it is searched again.
    const pasted = 'x'.repeat(2_000);
    await recall.block(ref('a'), pasted);
    await recall.block(ref('a'), pasted);
    expect(searches.slice(3)).toEqual([`agent:main:a:${pasted}`, `agent:main:a:${pasted}`]);
  });

  it("past its share, a session keeps its block instead of searching; a session's first turn searches", async () => {
    vi.useFakeTimers();
    // Searches take 100 ms; a share of 0.1 accrues 0.1 ms of search time a ms, at most 20 ms in hand.
    const { recall, searches, clock } = harness(100, { refreshMs: 1_000, maxShare: 0.1 });
    expect(await recall.block(ref('a'), 'a1')).toBe('block for a1'); // 20 in hand → −80 at 100
    expect(await recall.block(ref('b'), 'b1')).toBe('block for b1'); // b's first: −70 − 100 → −170 at 200
    clock.set(1_850);
    expect(await recall.block(ref('a'), 'a2')).toBe('block for a1'); // −5 in hand
    clock.set(1_900);
    expect(await recall.block(ref('a'), 'a3')).toBe('block for a3'); // 0 in hand → −90 at 2000
    clock.set(2_100);
    expect(await recall.block(ref('b'), 'b2')).toBe('block for b1');
    // Nothing is searched later for the turns that kept their block.
    await vi.advanceTimersByTimeAsync(5_000);
    expect(searches).toEqual(['agent:main:a:a1', 'agent:main:b:b1', 'agent:main:a:a3']);
    clock.set(3_000);
    expect(await recall.block(ref('b'), 'b3')).toBe('block for b3'); // 10 in hand
  });

  it('searches for each of a burst of quick messages until the burst has taken its 20 ms', async () => {
    // Searches of 5 ms one right after another: 20 ms in hand, each search spends 5 and accrues 0.5.
    const { recall, searches } = harness(5, { refreshMs: 1_000, maxShare: 0.1 });
    const blocks: string[] = [];
    for (let index = 0; index < 10; index++) blocks.push(await recall.block(ref('a'), `m${index}`));
    expect(searches).toHaveLength(5);
    expect(blocks.slice(0, 5)).toEqual(Array.from({ length: 5 }, (_, index) => `block for m${index}`));
    expect(new Set(blocks.slice(5))).toEqual(new Set(['block for m4']));
  });

  it('turns a failed search into the last block, or none', async () => {
    const clock = createManualClock(0);
    let fail = false;
    const recall = createAutoRecall({
      search: async (_session, query) => {
        if (fail) throw new Error('database gone');
        return `block for ${query}`;
      },
      clock,
      logger: silentLogger,
      refreshMs: 10,
      maxShare: 0.5,
    });
    expect(await recall.block(ref('a'), 'one')).toBe('block for one');
    fail = true;
    clock.advance(10);
    expect(await recall.block(ref('a'), 'two')).toBe('block for one');
    expect(await recall.block(ref('b'), 'three')).toBe('');
  });
});
