import { describe, expect, it } from 'vitest';
import { numberJson } from '../../src/util/index.js';

describe('numberJson', () => {
  it('writes a number as JSON.stringify does, NaN and the infinities as null', () => {
    for (const value of [
      0,
      -0,
      7,
      -12.5,
      1796628437833,
      2 ** 53 + 2,
      1e21,
      1.5e-7,
      Number.NaN,
      Infinity,
      -Infinity,
    ])
      expect(numberJson(value), String(value)).toBe(JSON.stringify(value));
  });
});
