import { describe, expect, it } from 'vitest';
import { fuseRankings, spreadToNeighbours } from '../../src/memory/ranking.js';

describe('search ranking steps', () => {
  it('spreads a turn score to the turns around it, in the same key only', () => {
    const ranked = spreadToNeighbours(
      [
        { sessionKey: 'a', memoryId: 5, score: 10, spreads: true },
        { sessionKey: 'a', memoryId: 7, score: 4, spreads: true },
        // A summary keeps its score and lends none.
        { sessionKey: 'b', memoryId: 2, score: 3, spreads: false },
      ],
      [0.5, 0.1],
    );
    const score = (sessionKey: string, memoryId: number) =>
      ranked.find((turn) => turn.sessionKey === sessionKey && turn.memoryId === memoryId)?.score;
    expect(score('a', 5)).toBeCloseTo(10 + 0.1 * 4);
    expect(score('a', 6)).toBeCloseTo(0.5 * 10 + 0.5 * 4);
    expect(score('a', 7)).toBeCloseTo(4 + 0.1 * 10);
    expect(score('a', 3)).toBeCloseTo(0.1 * 10);
    expect(score('a', 9)).toBeCloseTo(0.1 * 4);
    expect(score('b', 1)).toBeUndefined();
    expect(score('b', 2)).toBe(3);
    // a#4 and a#7 tie at 5: the lower MemoryID first.
    expect(ranked.map((turn) => `${turn.sessionKey}#${turn.memoryId}`).slice(0, 4)).toEqual([
      'a#5',
      'a#6',
      'a#4',
      'a#7',
    ]);
    // MemoryIDs start at 1: nothing is spread below.
    expect(spreadToNeighbours([{ sessionKey: 'a', memoryId: 1, score: 1, spreads: true }], [0.5])).toEqual([
      { sessionKey: 'a', memoryId: 1, score: 1 },
      { sessionKey: 'a', memoryId: 2, score: 0.5 },
    ]);
  });

  it('fuses rankings by reciprocal rank with weights', () => {
    expect(
      fuseRankings([
        { items: ['x', 'y', 'z'], weight: 1 },
        { items: ['z', 'w'], weight: 1 },
      ]),
    ).toEqual(['z', 'x', 'y', 'w']);
    // A weight of zero leaves the first ranking's order; ties keep first-seen order.
    expect(
      fuseRankings([
        { items: ['x', 'y'], weight: 1 },
        { items: ['y', 'q'], weight: 0 },
      ]),
    ).toEqual(['x', 'y', 'q']);
  });
});
