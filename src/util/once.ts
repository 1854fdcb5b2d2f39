/** Work run at most once, whose every caller waits for it (`once`). */
export interface Once {
  /** Starts the work at the first call; every call returns the first call's promise. */
  run(): Promise<void>;
  /** Whether `run` has been called, set before the work begins. */
  readonly started: boolean;
}

/**
 * `work` run at the first `run()`, every later call given the same promise: for a close, so that a second
 * caller waits for the close under way instead of returning while it runs (and, say, removing the files
 * under a connection still open).
 */
export function once(work: () => Promise<void>): Once {
  let running: Promise<void> | undefined;
  let started = false;
  return {
    run() {
      if (running === undefined) {
        started = true;
        running = work();
      }
      return running;
    },
    get started() {
      return started;
    },
  };
}
