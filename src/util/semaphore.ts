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

/** A mutex keyed by string: work for one key runs strictly in FIFO order, other keys run freely. */
export function createKeyedMutex(): {
  run<T>(key: string, task: () => Promise<T>): Promise<T>;
  isLocked(key: string): boolean;
} {
  const tails = new Map<string, Promise<unknown>>();
  return {
    run(key, task) {
      const previous = tails.get(key) ?? Promise.resolve();
      const result = previous.then(task, task);
      const tail = result.then(
        () => undefined,
        () => undefined,
      );
      tails.set(key, tail);
      tail.then(() => {
        if (tails.get(key) === tail) tails.delete(key);
      });
      return result;
    },
    isLocked: (key) => tails.has(key),
  };
}
