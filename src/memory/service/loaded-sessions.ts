import type { RamSession } from './context.js';

const noContexts: readonly RamSession[] = Object.freeze([]);

/**
 * The RAM contexts loaded in this process, by session id and by session key, and the entries they held when
 * last counted. Automatic recall asks for the asking key's contexts on every chat turn, and every append asks
 * whether the loaded entries are over their budget: answering either by walking every loaded session made a
 * server holding 10,000 idle sessions spend about a quarter of each chat turn on it. Iterates in the order
 * the sessions were loaded, as a Map does.
 */
export class LoadedSessions {
  readonly #byId = new Map<string, RamSession>();
  readonly #byKey = new Map<string, RamSession[]>();
  /** Each loaded context's entries when it was last counted (loaded, appended to, or all recounted). */
  readonly #counted = new Map<RamSession, number>();
  #countedTotal = 0;

  get size(): number {
    return this.#byId.size;
  }

  has(sessionId: string): boolean {
    return this.#byId.has(sessionId);
  }

  get(sessionId: string): RamSession | undefined {
    return this.#byId.get(sessionId);
  }

  values(): MapIterator<RamSession> {
    return this.#byId.values();
  }

  /** The loaded contexts of a key (its session instances loaded here), in the order they were loaded. */
  ofKey(sessionKey: string): readonly RamSession[] {
    return this.#byKey.get(sessionKey) ?? noContexts;
  }

  /**
   * The loaded entries as last counted. A context is counted when it loads and again after its appends and
   * its evictions or summaries (the RAM layer calls `recount`), so the figure follows what is loaded; the
   * budget check counts them all again (`recountAll`) before it unloads anything.
   */
  get countedEntries(): number {
    return this.#countedTotal;
  }

  /** Counts `ram`'s entries again, if it is loaded. */
  recount(ram: RamSession): void {
    const previous = this.#counted.get(ram);
    if (previous === undefined) return;
    this.#counted.set(ram, ram.entries.length);
    this.#countedTotal += ram.entries.length - previous;
  }

  /** Counts every loaded context's entries again and returns their total. */
  recountAll(): number {
    let total = 0;
    for (const ram of this.#byId.values()) {
      this.#counted.set(ram, ram.entries.length);
      total += ram.entries.length;
    }
    this.#countedTotal = total;
    return total;
  }

  /** Loads `ram` under its session id, in place of a context loaded under that id before. */
  add(ram: RamSession): void {
    const { sessionId, sessionKey } = ram.ref;
    const previous = this.#byId.get(sessionId);
    if (previous) this.#forget(previous);
    this.#counted.set(ram, ram.entries.length);
    this.#countedTotal += ram.entries.length;
    this.#byId.set(sessionId, ram);
    const sameKey = this.#byKey.get(sessionKey);
    if (sameKey) sameKey.push(ram);
    else this.#byKey.set(sessionKey, [ram]);
  }

  delete(sessionId: string): boolean {
    const ram = this.#byId.get(sessionId);
    if (!ram) return false;
    this.#byId.delete(sessionId);
    this.#forget(ram);
    return true;
  }

  /** Drops a loaded context from the key index and the count (`add` put it in both; its ref never changes). */
  #forget(ram: RamSession): void {
    this.#countedTotal -= this.#counted.get(ram)!;
    this.#counted.delete(ram);
    const sameKey = this.#byKey.get(ram.ref.sessionKey)!;
    if (sameKey.length === 1) this.#byKey.delete(ram.ref.sessionKey);
    else sameKey.splice(sameKey.indexOf(ram), 1);
  }
}
