/** Wall-clock time source, injected so tests can use fake time. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

/** The wall clock (`Date.now()`). */
export const systemClock: Clock = { now: () => Date.now() };

/** The longest delay `setTimeout` keeps: 2^31 - 1 ms (about 24.8 days). Past it Node fires after 1 ms. */
export const maxTimerMs = 2 ** 31 - 1;

/** A manually advanced clock for tests. */
export function createManualClock(
  startMs = 1_700_000_000_000,
): Clock & { advance(ms: number): void; set(ms: number): void } {
  let current = startMs;
  return {
    now: () => current,
    advance: (ms: number) => {
      current += ms;
    },
    set: (ms: number) => {
      current = ms;
    },
  };
}

/** Resolves after `ms`, or rejects with the signal's reason when aborted. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
