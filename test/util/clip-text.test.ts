import { expect, it } from 'vitest';
import { clipText } from '../../src/util/index.js';

it('cuts text longer than its limit to the limit, the last character an ellipsis, and leaves the rest', () => {
  expect(clipText('abcdef', 4)).toBe('abc…');
  expect(clipText('abcdef', 4)).toHaveLength(4);
  expect(clipText('abcd', 4)).toBe('abcd');
  expect(clipText('', 4)).toBe('');
});
