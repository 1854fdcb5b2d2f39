import { describe, expect, it } from 'vitest';
import { escapeRegExp, execLiteral, literalPattern } from '../../src/util/index.js';

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

describe('execLiteral', () => {
  const word = (escaped: string) => `(^|[^\\w])${escaped}(?![\\w])`;
  it('finds what the pattern finds, and nothing where the literal does not occur', () => {
    expect(execLiteral(word, 'echo', 'use echo now')?.index).toBe(3);
    expect(execLiteral(word, 'echo', 'use echoes now')).toBeNull();
    expect(execLiteral(word, 'echo', 'nothing here')).toBeNull();
    // Case-sensitive without `i`.
    expect(execLiteral(word, 'echo', 'use ECHO now')).toBeNull();
  });

  it('case-insensitive, rules out by the lower-cased text only where the folding is ASCII to ASCII', () => {
    expect(execLiteral(word, 'get_weather', 'run GET_WEATHER', 'i')).not.toBeNull();
    expect(execLiteral(word, 'Echo', 'say echo', 'i', 'say echo')).not.toBeNull();
    // A name outside ASCII is left to the pattern's own folding.
    expect(execLiteral(word, 'ΣΟΦΙΑ', 'call σοφια now', 'i')).not.toBeNull();
    // With `u` the long s folds onto s, which lower-casing does not show: the pattern decides.
    expect(execLiteral(word, 'last', 'the laſt one', 'iu')).not.toBeNull();
  });
});
