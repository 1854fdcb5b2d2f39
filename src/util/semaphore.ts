/** A counting semaphore: bounds concurrency of async work. FIFO fairness. */
export interface Semaphore {
  acquire(signal?: AbortSignal): Promise<() => void>;
  run<T>(task: () => Promise<T>, signal?: AbortSignal): Promise<T>;
  readonly active: number;
  readonly waiting: number;
}

export function createSemaphore(limit: number): Semaphore {
  if (!Number.isInteger(limit) || limit < 1)
    throw new RangeError(`semaphore limit must be a positive integer, got ${limit}`);
  let active = 0;
  const waiters: Array<{ grant: () => void; reject: (reason: unknown) => void }> = [];

  const release = () => {
    const next = waiters.shift();
    if (next) next.grant();
    else active--;
  };

  const makeRelease = () => {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      release();
    };
  };

  const acquire = (signal?: AbortSignal): Promise<() => void> => {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (active < limit) {
      active++;
      return Promise.resolve(makeRelease());
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve(makeRelease());
        },
        reject,
      };
      const onAbort = () => {
        const index = waiters.indexOf(waiter);
        if (index >= 0) waiters.splice(index, 1);
        reject(signal!.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      waiters.push(waiter);
    });
  };

  return {
    acquire,
    async run(task, signal) {
      const done = await acquire(signal);
      try {
        return await task();
      } finally {
        done();
      }
    },
    get active() {
      return active;
    },
    get waiting() {
      return waiters.length;
    },
  };
}

/**
 * A mutex keyed by string: work for one key runs strictly in FIFO order, other keys run freely. Work for a
 * key nobody holds starts at once, within `run`; work that waits starts when the work before it settles.
 * A chat turn takes a key's lock about five times, so the lock makes one promise of its own each time
 * instead of chaining four onto the key's last one.
 */
export function createKeyedMutex(): {
  run<T>(key: string, task: () => Promise<T>): Promise<T>;
  isLocked(key: string): boolean;
} {
  // A key is held while it is here; its value is the work waiting for it, oldest first (null for none yet).
  const held = new Map<string, Array<() => void> | null>();
  const release = (key: string) => {
    const next = held.get(key)?.shift();
    if (next) next();
    else held.delete(key);
  };
  const start = <T>(key: string, task: () => Promise<T>): Promise<T> => {
    let result: Promise<T>;
    try {
      result = task();
    } catch (error) {
      result = Promise.reject(error);
    }
    const done = () => release(key);
    result.then(done, done);
    return result;
  };
  return {
    run(key, task) {
      if (!held.has(key)) {
        held.set(key, null);
        return start(key, task);
      }
      return new Promise((resolve, reject) => {
        const waiting = held.get(key) ?? [];
        waiting.push(() => {
          start(key, task).then(resolve, reject);
        });
        held.set(key, waiting);
      });
    },
    isLocked: (key) => held.has(key),
  };
}
