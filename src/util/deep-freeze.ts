/**
 * Freezes `value` and everything reachable from it through its own enumerable keys, in place; returns it.
 * An object already frozen is taken as frozen all the way down (which also ends cycles).
 */
export function deepFreeze<Value>(value: Value): Value {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}
