import { describe, expect, it } from 'vitest';
import { median, percentile } from '../../bench/stats.js';

describe('bench statistics', () => {
  const hundred = Array.from({ length: 100 }, (_, index) => index + 1);

  it('takes a percentile as the nearest measured rank, the percent given as 0–100', () => {
    expect(percentile(hundred, 50)).toBe(51);
    expect(percentile(hundred, 99)).toBe(100);
    expect(percentile(hundred, 90)).toBe(91);
    expect(percentile(hundred, 0)).toBe(1);
    expect(percentile(hundred, 100)).toBe(100);
    expect(percentile([7, 9], 99)).toBe(9);
  });

  it('has no percentile of nothing', () => {
    expect(percentile([], 50)).toBeNaN();
  });

  it('takes the median of values in any order without reordering them', () => {
    const values = [5, 1, 4, 2, 3];
    expect(median(values)).toBe(3);
    expect(values).toEqual([5, 1, 4, 2, 3]);
    expect(median([4, 1, 3, 2])).toBe(3);
  });
});
