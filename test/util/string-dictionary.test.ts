import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { StringDictionary } from '../../src/util/index.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const oldSpaceUsed = () =>
  getHeapSpaceStatistics().find((space) => space.space_name === 'old_space')!.space_used_size;

/**
 * Old-generation bytes left per key set and deleted, on a collection that has outlived two full collections:
 * the least of three runs, since the test runner's own objects promoted meanwhile count too.
 */
function oldBytesPerSetAndDelete(collection: {
  set(key: string, value: number): unknown;
  delete(key: string): unknown;
}) {
  const keys = Array.from({ length: 1_000 }, (_, index) => `run-${index}-of-a-session`);
  const cycles = 20_000;
  const runs: number[] = [];
  for (let run = 0; run < 3; run++) {
    gc();
    gc();
    const before = oldSpaceUsed();
    for (let cycle = 0; cycle < cycles; cycle++) {
      const key = keys[cycle % keys.length]!;
      collection.set(key, cycle);
      collection.delete(key);
    }
    runs.push((oldSpaceUsed() - before) / cycles);
  }
  return Math.min(...runs);
}

describe('StringDictionary', () => {
  it('keeps a map of strings: get, has, set, delete', () => {
    const table = new StringDictionary<number>();
    expect(table.get('a')).toBeUndefined();
    expect(table.has('a')).toBe(false);
    table.set('a', 1);
    table.set('b', 0);
    table.set('a', 3);
    expect(table.get('a')).toBe(3);
    expect(table.get('b')).toBe(0);
    expect(table.has('b')).toBe(true);
    table.delete('b');
    table.delete('b');
    expect(table.has('b')).toBe(false);
    expect(table.get('b')).toBeUndefined();
    expect(table.get('a')).toBe(3);
  });

  it('treats hostile keys as plain keys: no prototype reached, none polluted', () => {
    const table = new StringDictionary<string>();
    const hostile = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf'];
    for (const key of hostile) {
      expect(table.get(key)).toBeUndefined();
      expect(table.has(key)).toBe(false);
      table.set(key, `value of ${key}`);
    }
    for (const key of hostile) expect(table.get(key)).toBe(`value of ${key}`);
    expect(({} as Record<string, unknown>).toString).toBe(Object.prototype.toString);
    expect(Object.getPrototypeOf({})).toBe(Object.prototype);
    table.delete('__proto__');
    expect(table.has('__proto__')).toBe(false);
    expect(table.get('constructor')).toBe('value of constructor');
  });

  it('holds integer-like and empty keys like any other', () => {
    const table = new StringDictionary<number>();
    const keys = ['0', '1', '4294967295', '-1', '1e3', ''];
    for (const key of keys) table.set(key, key.length);
    for (const key of keys) expect(table.get(key)).toBe(key.length);
    table.delete('0');
    expect(table.has('0')).toBe(false);
    expect(table.get('1')).toBe(1);
  });

  it('leaves nothing in the old generation when recurring keys come and go, where a long-lived Map does', () => {
    const map = new Map<string, number>();
    const dictionary = new StringDictionary<number>();
    // Both live in the old generation before the measurement, as a server's collections do.
    expect(oldBytesPerSetAndDelete(map)).toBeGreaterThan(10);
    expect(oldBytesPerSetAndDelete(dictionary)).toBeLessThan(2);
  });
});
