import { describe, expect, it, vi } from 'vitest';
import {
  addAbortListener,
  createSignalWatchers,
  LazyAbortController,
  removeAbortListener,
  signalOf,
} from '../../src/util/index.js';

describe('LazyAbortController', () => {
  it('makes its signal only when asked, aborted with the same reason when asked after the abort', () => {
    const controller = new LazyAbortController();
    const made = vi.spyOn(AbortController.prototype, 'signal', 'get');
    try {
      const reason = new Error('stop');
      expect(controller.aborted).toBe(false);
      controller.abort(reason);
      controller.abort(new Error('second'));
      expect(controller.aborted).toBe(true);
      expect(controller.reason).toBe(reason);
      expect(made).not.toHaveBeenCalled();
      const { signal } = controller;
      expect(signal.aborted).toBe(true);
      expect(signal.reason).toBe(reason);
      expect(controller.signal).toBe(signal);
      expect(signalOf(controller)).toBe(signal);
    } finally {
      made.mockRestore();
    }
  });

  it('gives an abort without a reason the AbortError an AbortController gives', () => {
    const lazy = new LazyAbortController();
    const eager = new AbortController();
    lazy.abort();
    eager.abort();
    expect(lazy.reason).toBeInstanceOf(DOMException);
    expect((lazy.reason as DOMException).name).toBe((eager.signal.reason as DOMException).name);
    expect(lazy.signal.reason).toBe(lazy.reason);
  });

  it('tells a signal made before the abort and its own listeners, once each, and no removed or late one', () => {
    const controller = new LazyAbortController();
    const told: string[] = [];
    controller.signal.addEventListener('abort', () =>
      told.push(`signal:${String(controller.signal.reason)}`),
    );
    const removed = () => told.push('removed');
    controller.onAbort(() => told.push('listener'));
    controller.onAbort(removed);
    controller.offAbort(removed);
    controller.abort('why');
    controller.abort('again');
    controller.onAbort(() => told.push('late'));
    expect(told).toEqual(['signal:why', 'listener']);
  });

  it('is watched by signal watchers without a signal being made', () => {
    const interrupted: string[] = [];
    const watchers = createSignalWatchers<string>((item) => interrupted.push(item));
    const controller = new LazyAbortController();
    const made = vi.spyOn(controller, 'signal', 'get');
    watchers.add(controller, 'a');
    watchers.add(controller, 'b');
    watchers.add(controller, 'c');
    watchers.remove(controller, 'b');
    controller.abort();
    expect(interrupted.sort()).toEqual(['a', 'c']);
    expect(made).not.toHaveBeenCalled();

    // The last item removed takes the listener with it.
    const other = new LazyAbortController();
    const added = vi.spyOn(other, 'onAbort');
    const dropped = vi.spyOn(other, 'offAbort');
    watchers.add(other, 'x');
    watchers.remove(other, 'x');
    other.abort();
    expect(interrupted).not.toContain('x');
    expect(dropped.mock.calls).toEqual(added.mock.calls);
  });

  it('adds and removes abort listeners on either kind of source, making no signal for a lazy one', () => {
    const lazy = new LazyAbortController();
    const made = vi.spyOn(lazy, 'signal', 'get');
    const eager = new AbortController();
    const told: string[] = [];
    const kept = (name: string) => () => told.push(name);
    const removed = () => told.push('removed');
    for (const [name, source] of [
      ['lazy', lazy],
      ['eager', eager.signal],
    ] as const) {
      addAbortListener(source, kept(name));
      addAbortListener(source, removed);
      removeAbortListener(source, removed);
    }
    lazy.abort();
    eager.abort();
    expect(told).toEqual(['lazy', 'eager']);
    expect(made).not.toHaveBeenCalled();
  });

  it('passes a plain AbortSignal through signalOf unchanged', () => {
    const signal = new AbortController().signal;
    expect(signalOf(signal)).toBe(signal);
  });
});
