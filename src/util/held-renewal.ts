/**
 * Renews something (a lease) every `intervalMs` while anything holds it: `hold` when a piece of work that
 * needs it begins, `release` when it ends. The timer stops at its first tick with nothing held rather than at
 * the release, so work that comes and goes within milliseconds does not make and clear a timer each time. A
 * renewal still in flight at a tick is not started again. `renew` reports its own failures; it must not reject.
 */
export interface HeldRenewal {
  hold(): void;
  release(): void;
  /** Whether anything holds it now. */
  holding(): boolean;
  /** Stops the timer, whatever is held, and waits for a renewal in flight. */
  stop(): Promise<void>;
}

export function createHeldRenewal(options: { intervalMs: number; renew: () => Promise<void> }): HeldRenewal {
  let held = 0;
  let timer: NodeJS.Timeout | undefined;
  let renewing: Promise<void> | undefined;
  const tick = () => {
    if (held === 0) {
      clearInterval(timer);
      timer = undefined;
      return;
    }
    renewing ??= options.renew().finally(() => {
      renewing = undefined;
    });
  };
  return {
    hold() {
      held++;
      if (timer) return;
      timer = setInterval(tick, options.intervalMs);
      timer.unref();
    },
    release() {
      if (held > 0) held--;
    },
    holding: () => held > 0,
    async stop() {
      clearInterval(timer);
      timer = undefined;
      await renewing;
    },
  };
}
