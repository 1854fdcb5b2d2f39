import { describe, expect, it } from 'vitest';
import { FreshMap } from '../../src/workflow/fresh-map.js';

describe('FreshMap', () => {
  it('answers as a Map through the renewals of a sliding window of keys', () => {
    const fresh = new FreshMap<string, number>();
    const plain = new Map<string, number>();
    // A window of 100 keys sliding over 1,000: many renewals, with deletes and updates in between.
    for (let index = 0; index < 1_000; index++) {
      for (const map of [fresh, plain]) {
        map.set(`k${index}`, index);
        if (index >= 100) map.delete(`k${index - 100}`);
        if (index % 7 === 0) map.set(`k${index - (index % 50)}`, -index);
      }
      expect(fresh.size).toBe(plain.size);
    }
    expect([...fresh.keys()]).toEqual([...plain.keys()]);
    expect([...fresh.values()]).toEqual([...plain.values()]);
    expect([...fresh]).toEqual([...plain.entries()]);
    expect(fresh.get('k950')).toBe(plain.get('k950'));
    expect(fresh.has('k899')).toBe(false);
    expect(fresh.delete('k999')).toBe(true);
    expect(fresh.delete('k999')).toBe(false);
  });
});
