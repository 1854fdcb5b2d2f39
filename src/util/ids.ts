import { randomBytes } from 'node:crypto';

/** Generates ids. Injected everywhere ids are made so tests can be deterministic. */
export type IdGenerator = (prefix?: string) => string;

const alphabet = '0123456789abcdefghjkmnpqrstvwxyz';

function encodeTime(timeMs: number, length: number): string {
  let remaining = timeMs;
  let out = '';
  for (let index = 0; index < length; index++) {
    out = alphabet[remaining % 32] + out;
    remaining = Math.floor(remaining / 32);
  }
  return out;
}

/**
 * Time-sortable ids (ULID-like: 10 chars of time, 12 random), optionally prefixed: `run_01h…`.
 * Within one millisecond, ids from the same generator still sort in creation order.
 */
export function createIdGenerator(options: { now?: () => number } = {}): IdGenerator {
  const now = options.now ?? Date.now;
  let lastTime = -1;
  let counter = 0;
  return (prefix?: string) => {
    const time = now();
    if (time === lastTime) counter++;
    else {
      lastTime = time;
      counter = 0;
    }
    const random = randomBytes(8);
    let tail = encodeTime(counter, 4);
    for (let index = 0; index < 8; index++) tail += alphabet[random[index]! % 32];
    const id = encodeTime(time, 10) + tail;
    return prefix ? `${prefix}_${id}` : id;
  };
}

/** A deterministic generator for tests: `prefix_1`, `prefix_2`, … */
export function createSequentialIdGenerator(): IdGenerator {
  let next = 1;
  return (prefix?: string) => `${prefix ?? 'id'}_${next++}`;
}
