import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { createSignalWatchers } from '../../src/util/index.js';

describe('signal watchers', () => {
  it('tells every item still watched when the signal aborts, through one listener', () => {
    const told: string[] = [];
    const watchers = createSignalWatchers<string>((item) => told.push(item));
    const controller = new AbortController();
    for (const item of ['a', 'b', 'c', 'd']) watchers.add(controller.signal, item);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    watchers.remove(controller.signal, 'b');
    watchers.remove(controller.signal, 'never added');
    controller.abort();
    expect(told.sort()).toEqual(['a', 'c', 'd']);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    // Removing after the abort is harmless, and nothing is told twice.
    watchers.remove(controller.signal, 'a');
    expect(told).toHaveLength(3);
  });

  it('leaves no listener on a signal once its last item is removed, and watches it again after', () => {
    const told: number[] = [];
    const watchers = createSignalWatchers<number>((item) => told.push(item));
    const longLived = new AbortController();
    for (let run = 0; run < 20; run++) {
      watchers.add(longLived.signal, run);
      watchers.add(longLived.signal, run + 100);
      expect(getEventListeners(longLived.signal, 'abort')).toHaveLength(1);
      watchers.remove(longLived.signal, run);
      watchers.remove(longLived.signal, run + 100);
      expect(getEventListeners(longLived.signal, 'abort')).toHaveLength(0);
    }
    watchers.add(longLived.signal, 7);
    longLived.abort();
    expect(told).toEqual([7]);
  });

  it('with keepListenerWhenEmpty, keeps the one listener between items', () => {
    const told: number[] = [];
    const watchers = createSignalWatchers<number>((item) => told.push(item), { keepListenerWhenEmpty: true });
    const controller = new AbortController();
    for (let item = 0; item < 20; item++) {
      watchers.add(controller.signal, item);
      watchers.remove(controller.signal, item);
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    }
    watchers.add(controller.signal, 42);
    controller.abort();
    expect(told).toEqual([42]);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('keeps the watchers of different signals and of different sets apart', () => {
    const first: string[] = [];
    const second: string[] = [];
    const one = createSignalWatchers<string>((item) => first.push(item));
    const other = createSignalWatchers<string>((item) => second.push(item));
    const a = new AbortController();
    const b = new AbortController();
    one.add(a.signal, 'one-a');
    one.add(b.signal, 'one-b');
    other.add(a.signal, 'other-a');
    a.abort();
    expect(first).toEqual(['one-a']);
    expect(second).toEqual(['other-a']);
    b.abort();
    expect(first).toEqual(['one-a', 'one-b']);
  });
});
