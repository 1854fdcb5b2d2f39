import { type AbortSource, addAbortListener, removeAbortListener } from './lazy-abort.js';

/** Items that end early when a signal aborts: a model call streaming under a run, a tool call racing it. */
export interface SignalWatchers<Item> {
  /** `item` is told when `signal` aborts, unless it is removed first. A lazy controller makes no signal for it. */
  add(signal: AbortSource, item: Item): void;
  remove(signal: AbortSource, item: Item): void;
}

/**
 * Watchers with one `abort` listener per signal for all its items at a time: a listener per item would
 * cost an EventTarget add and remove each (more than the rest of a no-op tool call), and Node warns past ten
 * on one signal. The listener goes with the signal's last item, so a caller's signal that outlives its runs
 * keeps nothing of them; with `keepListenerWhenEmpty` it stays for the next items instead (one add for all
 * the items a signal ever has), for signals that end with their items' owner. The items are an array, not a
 * Set, which would reallocate its table each time it empties.
 */
export function createSignalWatchers<Item>(
  onAbort: (item: Item) => void,
  options: { keepListenerWhenEmpty?: boolean } = {},
): SignalWatchers<Item> {
  const keepListener = options.keepListenerWhenEmpty ?? false;
  const watching = new WeakMap<AbortSource, { items: Item[]; listener: () => void }>();
  return {
    add(signal, item) {
      const watched = watching.get(signal);
      if (watched) {
        watched.items.push(item);
        return;
      }
      const items = [item];
      const listener = () => {
        watching.delete(signal);
        for (const each of items.splice(0)) onAbort(each);
      };
      watching.set(signal, { items, listener });
      addAbortListener(signal, listener);
    },
    remove(signal, item) {
      const watched = watching.get(signal);
      const index = watched ? watched.items.indexOf(item) : -1;
      if (index < 0) return;
      const { items, listener } = watched!;
      // Order does not matter (an abort tells them all): the last one takes the freed place.
      const last = items.pop()!;
      if (last !== item) items[index] = last;
      if (items.length > 0 || keepListener) return;
      watching.delete(signal);
      removeAbortListener(signal, listener);
    },
  };
}
