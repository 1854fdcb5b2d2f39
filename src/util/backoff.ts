/**
 * A retry timer whose wait doubles each time it is armed, up to a most, and starts over on `reset`: for
 * background work that tries the database again later (memory's write-through, kept writes, cron's timer).
 */
export interface BackoffTimer {
  /** Runs the work after the current wait, once however often it is called before then; the wait doubles. */
  arm(): void;
  /** The work went through: the next `arm` waits the first delay again. */
  reset(): void;
  /** Disarms the timer for good: later `arm` calls do nothing (the owner is closing). */
  stop(): void;
  /** The wait the next `arm` uses. */
  readonly delayMs: number;
}

export function createBackoffTimer(options: {
  firstDelayMs: number;
  maxDelayMs: number;
  run(): void;
}): BackoffTimer {
  let delayMs = options.firstDelayMs;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  return {
    arm() {
      if (timer || stopped) return;
      timer = setTimeout(() => {
        timer = undefined;
        options.run();
      }, delayMs);
      timer.unref?.();
      delayMs = Math.min(delayMs * 2, options.maxDelayMs);
    },
    reset() {
      delayMs = options.firstDelayMs;
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
    },
    get delayMs() {
      return delayMs;
    },
  };
}
