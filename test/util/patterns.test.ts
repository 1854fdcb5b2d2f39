import { describe, expect, it } from 'vitest';
import { escapeRegExp, literalPattern } from '../../src/util/index.js';

const wholeWord = (escaped: string) => `(^|\\W)${escaped}($|\\W)`;
const prefix = (escaped: string) => `^${escaped}`;

describe('literal patterns', () => {
  it('match the literal, metacharacters included, and nothing it would mean as a pattern', () => {
    const pattern = literalPattern(wholeWord, 'a.b*(c)');
    expect(pattern.test('see a.b*(c) here')).toBe(true);
    expect(pattern.test('see axbbb(c) here')).toBe(false);
    expect(escapeRegExp('[x]+?')).toBe('\\[x\\]\\+\\?');
  });

  it('compile once per shape, literal and flags', () => {
    const first = literalPattern(wholeWord, 'deploy', 'i');
    expect(literalPattern(wholeWord, 'deploy', 'i')).toBe(first);
    expect(literalPattern(wholeWord, 'deploy')).not.toBe(first);
    const other = literalPattern(prefix, 'deploy', 'i');
    expect(other).not.toBe(first);
    expect(other.test('DEPLOY now')).toBe(true);
    expect(other.test('now deploy')).toBe(false);
    expect(first.test('now DEPLOY')).toBe(true);
  });
});
