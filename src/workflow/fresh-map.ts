/**
 * A Map for an index that lives as long as its engine while its keys come and go (one per run: the
 * retained runs, the scheduler's states, the artifacts by run), which starts over in a new Map now and
 * then.
 *
 * Why: V8 keeps a Map's entries in a hash table that it replaces once deletions have used up its free
 * slots — in the old generation when the table it replaces is there (it got there by being alive during
 * two scavenges, e.g. while other code allocated and the engine sat idle). The replaced table is garbage,
 * but it still points at the entries it held; from the old generation, those pointers keep every young
 * object they reach alive through each scavenge until the next full collection. For an index of runs that
 * is up to every retained run per replacement, and the scavenger then copied and promoted megabytes per
 * cycle (2–3× the CPU per run, in processes that had fallen into it). A new Map starts in the young
 * generation with a young table, and garbage there keeps nothing alive.
 */
export class FreshMap<K, V> {
  private map = new Map<K, V>();
  /** Keys added since the current Map was made. */
  private added = 0;

  get size(): number {
    return this.map.size;
  }

  get(key: K): V | undefined {
    return this.map.get(key);
  }

  has(key: K): boolean {
    return this.map.has(key);
  }

  set(key: K, value: V): this {
    // Copying costs a step per entry and the new table's growth: starting over after twice `size` (and 64)
    // additions keeps that to about half a step per addition, and the table younger than the runs between
    // two scavenges.
    if (++this.added > 2 * this.map.size + 64) {
      // forEach, not `new Map(this.map)`: that walks an iterator, an entry array and a result per entry.
      const renewed = new Map<K, V>();
      this.map.forEach((entry, entryKey) => {
        renewed.set(entryKey, entry);
      });
      this.map = renewed;
      this.added = 0;
    }
    this.map.set(key, value);
    return this;
  }

  delete(key: K): boolean {
    return this.map.delete(key);
  }

  keys(): IterableIterator<K> {
    return this.map.keys();
  }

  values(): IterableIterator<V> {
    return this.map.values();
  }

  entries(): IterableIterator<[K, V]> {
    return this.map.entries();
  }

  [Symbol.iterator](): IterableIterator<[K, V]> {
    return this.map.entries();
  }
}
