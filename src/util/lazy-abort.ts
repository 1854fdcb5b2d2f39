/**
 * An AbortController whose AbortSignal is made only when something asks for it. Node makes an AbortSignal
 * slowly (3.2 µs on a 2-core VM where an EventTarget takes 0.1 µs; 7–13 µs a chat turn in its profiles), and
 * a chat turn's run needs none unless a provider, a hook or a tool reads one: its own code asks `aborted`
 * and `reason`, and is told of an abort through `onAbort`, which makes no signal either. Once made, the
 * signal aborts exactly as a controller's would: at once with the same reason, also when read after the
 * abort.
 */
export class LazyAbortController {
  #controller: AbortController | undefined;
  #aborted: { reason: unknown } | undefined;
  #listeners: Array<() => void> | undefined;

  get aborted(): boolean {
    return this.#aborted !== undefined;
  }

  get reason(): unknown {
    return this.#aborted?.reason;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#aborted.reason);
    }
    return this.#controller.signal;
  }

  /** As `AbortController.abort`: the first call counts, without a reason the reason is an `AbortError`. */
  abort(reason?: unknown): void {
    if (this.#aborted) return;
    const given =
      reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason;
    this.#aborted = { reason: given };
    this.#controller?.abort(given);
    const listeners = this.#listeners;
    this.#listeners = undefined;
    if (listeners) for (const listener of listeners) listener();
  }

  /** `listener` runs once when this aborts (never, if it already has), after the signal's own listeners. */
  onAbort(listener: () => void): void {
    if (this.#aborted) return;
    if (this.#listeners === undefined) this.#listeners = [listener];
    else this.#listeners.push(listener);
  }

  offAbort(listener: () => void): void {
    const listeners = this.#listeners;
    const index = listeners ? listeners.indexOf(listener) : -1;
    if (index >= 0) listeners!.splice(index, 1);
  }
}

/** What a run or a model call may be aborted through: a signal, or a controller that makes one on demand. */
export type AbortSource = AbortSignal | LazyAbortController;

/**
 * Calls `listener` once when `source` aborts: through a lazy controller's `onAbort` (no signal made), or as
 * a signal's `abort` listener.
 */
export function addAbortListener(source: AbortSource, listener: () => void): void {
  if (source instanceof LazyAbortController) source.onAbort(listener);
  else source.addEventListener('abort', listener, { once: true });
}

export function removeAbortListener(source: AbortSource, listener: () => void): void {
  if (source instanceof LazyAbortController) source.offAbort(listener);
  else source.removeEventListener('abort', listener);
}

/** The source's AbortSignal, made now if it is a lazy controller that has none yet. */
export function signalOf(source: AbortSource): AbortSignal {
  return source instanceof LazyAbortController ? source.signal : source;
}
