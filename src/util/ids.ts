import { randomFillSync } from 'node:crypto';

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

/** Random bytes drawn 4 KiB at a time: a chat turn makes several ids, and each draw is a call into OpenSSL. */
const randomPool = Buffer.alloc(4096);
let randomOffset = randomPool.length;

function randomByte(): number {
  if (randomOffset === randomPool.length) {
    randomFillSync(randomPool);
    randomOffset = 0;
  }
  return randomPool[randomOffset++]!;
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
    let tail = encodeTime(counter, 4);
    for (let index = 0; index < 8; index++) tail += alphabet[randomByte() % 32];
    const id = encodeTime(time, 10) + tail;
    return prefix ? `${prefix}_${id}` : id;
  };
}

/** A deterministic generator for tests: `prefix_1`, `prefix_2`, … */
export function createSequentialIdGenerator(): IdGenerator {
  let next = 1;
  return (prefix?: string) => `${prefix ?? 'id'}_${next++}`;
}
