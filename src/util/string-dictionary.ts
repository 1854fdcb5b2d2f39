/**
 * A map from strings for long-lived collections whose keys recur and come and go with every request: a
 * session's lock, the appends waiting for a session. V8 keeps a Map's deleted entries as holes until it
 * rebuilds the hash table, and a Map that has outlived a young-generation collection rebuilds it in the old
 * generation: each key set and deleted there leaves about 50 bytes that only a full collection frees. A
 * null-prototype object is a dictionary that reuses the slots of deleted keys. Its keys are internalized,
 * though: a key it has not seen before is copied into V8's string table, in the old generation, and costs
 * about twice a Map's set, so a collection keyed by an id made fresh for each request (a run id) stays a Map
 * (docs/decisions/0040-recurring-keys-in-dictionaries.md). It has no size and no iteration (an object's
 * keys would not come in insertion order: integer-like keys first); a collection that needs either stays a Map.
 */
export class StringDictionary<Value extends NonNullable<unknown> | null> {
  readonly #entries: Record<string, Value> = Object.create(null);

  get(key: string): Value | undefined {
    return this.#entries[key];
  }

  has(key: string): boolean {
    return this.#entries[key] !== undefined;
  }

  set(key: string, value: Value): void {
    this.#entries[key] = value;
  }

  delete(key: string): void {
    delete this.#entries[key];
  }
}
