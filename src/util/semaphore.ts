import { StringDictionary } from './string-dictionary.js';

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

/** A FIFO mutex with a synchronous `held` check, so the uncontended path can skip promises. */
export interface FifoLock {
  readonly held: boolean;
  acquire(): Promise<void>;
  /** Takes the lock if nobody holds it; false (and nothing queued) otherwise. */
  tryAcquire(): boolean;
  release(): void;
}

export function createFifoLock(): FifoLock {
  return new QueueLock();
}

// A class rather than a literal of closures: every transaction and every keyed lock taken makes one, and its
// methods are then shared.
class QueueLock implements FifoLock {
  held = false;
  private readonly waiters: Array<() => void> = [];

  acquire(): Promise<void> {
    if (this.tryAcquire()) return Promise.resolve();
    return new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  tryAcquire(): boolean {
    if (this.held) return false;
    this.held = true;
    return true;
  }

  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.held = false;
  }
}

/**
 * A mutex keyed by string: work for one key runs strictly in FIFO order, other keys run freely; a FifoLock
 * per key held. Work for a key nobody holds starts at once, within `run`; work that waits starts when the
 * work before it settles. A chat turn takes a key's lock about five times, so the lock makes one promise of
 * its own each time instead of chaining four onto the key's last one.
 */
export function createKeyedMutex(): {
  run<T>(key: string, task: () => Promise<T>): Promise<T>;
  isLocked(key: string): boolean;
} {
  const locks = new StringDictionary<FifoLock>();
  const start = <T>(key: string, lock: FifoLock, task: () => Promise<T>): Promise<T> => {
    let result: Promise<T>;
    try {
      result = task();
    } catch (error) {
      result = Promise.reject(error);
    }
    const done = () => {
      lock.release();
      if (!lock.held) locks.delete(key);
    };
    result.then(done, done);
    return result;
  };
  return {
    run(key, task) {
      let lock = locks.get(key);
      if (lock === undefined) {
        lock = createFifoLock();
        locks.set(key, lock);
      }
      if (lock.tryAcquire()) return start(key, lock, task);
      const held = lock;
      return held.acquire().then(() => start(key, held, task));
    },
    isLocked: (key) => locks.has(key),
  };
}
