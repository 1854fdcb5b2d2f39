import { describe, expect, it } from 'vitest';
import { createManualClock, createRecentMap, rememberNewest } from '../../src/util/index.js';

describe('rememberNewest', () => {
  it('keeps the newest entries: setting a key again makes it the newest', () => {
    const map = new Map<string, number>();
    rememberNewest(map, 'a', 1, 2);
    rememberNewest(map, 'b', 2, 2);
    rememberNewest(map, 'a', 3, 2);
    rememberNewest(map, 'c', 4, 2);
    expect([...map]).toEqual([
      ['a', 3],
      ['c', 4],
    ]);
  });
});

describe('createRecentMap', () => {
  it('answers a key until its window has passed from the time it was set with, then forgets it', () => {
    const clock = createManualClock(1_000);
    const recent = createRecentMap<string>({ windowMs: 100, maxEntries: 10, clock });
    recent.set('old', 'x', 950);
    recent.set('new', 'y', 1_000);
    clock.advance(49);
    expect([recent.get('old'), recent.get('new')]).toEqual(['x', 'y']);
    clock.advance(1);
    expect([recent.get('old'), recent.has('old'), recent.get('new')]).toEqual([undefined, false, 'y']);
    recent.delete('new');
    expect(recent.get('new')).toBeUndefined();
  });

  it('holds the newest maxEntries keys', () => {
    const clock = createManualClock(0);
    const recent = createRecentMap<number>({ windowMs: 100, maxEntries: 2, clock });
    for (const [index, key] of ['a', 'b', 'c'].entries()) recent.set(key, index, 0);
    expect(['a', 'b', 'c'].map((key) => recent.has(key))).toEqual([false, true, true]);
  });
});
