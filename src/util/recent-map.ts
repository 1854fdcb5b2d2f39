import type { Clock } from './clock.js';

/** Sets `key` as the newest entry of `map`, forgetting the oldest once it holds more than `maxEntries`. */
export function rememberNewest<Value>(
  map: Map<string, Value>,
  key: string,
  value: Value,
  maxEntries: number,
): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > maxEntries) map.delete(map.keys().next().value as string);
}

/**
 * Values by key for `windowMs` after the time each was set with (the newest `maxEntries`): what a key was
 * answered with, while a retry under it is still answered so.
 */
export interface RecentMap<Value> {
  /** The value, unless its window has passed (then it is forgotten). */
  get(key: string): Value | undefined;
  has(key: string): boolean;
  set(key: string, value: Value, atMs: number): void;
  delete(key: string): void;
}

export function createRecentMap<Value>(options: {
  windowMs: number;
  maxEntries: number;
  clock: Clock;
}): RecentMap<Value> {
  const entries = new Map<string, { value: Value; atMs: number }>();
  return {
    get(key) {
      const entry = entries.get(key);
      if (entry === undefined) return undefined;
      if (options.clock.now() - entry.atMs < options.windowMs) return entry.value;
      entries.delete(key);
      return undefined;
    },
    has: (key) => entries.has(key),
    set: (key, value, atMs) => rememberNewest(entries, key, { value, atMs }, options.maxEntries),
    delete: (key) => {
      entries.delete(key);
    },
  };
}
