import { describe, expect, it } from 'vitest';
import {
  createManualClock,
  ErrorCodes,
  isStoreUnavailable,
  retrying,
  SystemError,
  UserInputError,
} from '../../src/util/index.js';

const unavailable = () =>
  new SystemError({ code: ErrorCodes.storeUnavailable, message: 'connection terminated', retryable: true });

/** An attempt that fails as unavailable `failures` times, then returns 'stored'. */
function storedAfter(failures: number): () => Promise<string> {
  let left = failures;
  return async () => {
    if (left-- > 0) throw unavailable();
    return 'stored';
  };
}

describe('retrying', () => {
  it('tries a retryable failure again after doubling waits, up to the longest, and returns what works', async () => {
    const waits: number[] = [];
    const value = await retrying(storedAfter(4), {
      firstDelayMs: 1,
      maxDelayMs: 3,
      forMs: 1_000,
      retryable: isStoreUnavailable,
      onRetry: (_error, delayMs) => waits.push(delayMs),
    });
    expect(value).toBe('stored');
    expect(waits).toEqual([1, 2, 3, 3]);
  });

  it('waits with the sleep it is given, and only with it', async () => {
    const slept: number[] = [];
    const value = await retrying(storedAfter(2), {
      firstDelayMs: 5,
      maxDelayMs: 50,
      forMs: 60_000,
      retryable: isStoreUnavailable,
      // Returns at once: the waits recorded are the only ones taken.
      sleep: async (ms) => {
        slept.push(ms);
      },
    });
    expect(value).toBe('stored');
    expect(slept).toEqual([5, 10]);
  });

  it('throws a failure it may not retry, and the last one once the time allowed is up', async () => {
    const refused = new UserInputError({ code: ErrorCodes.invalidRequest, message: 'no' });
    let calls = 0;
    await expect(
      retrying(
        async () => {
          calls++;
          throw refused;
        },
        { firstDelayMs: 1, maxDelayMs: 1, forMs: 1_000, retryable: isStoreUnavailable },
      ),
    ).rejects.toBe(refused);
    expect(calls).toBe(1);

    calls = 0;
    // The clock moves by each wait only, so the count does not depend on the machine's speed.
    const clock = createManualClock(0);
    await expect(
      retrying(
        async () => {
          calls++;
          throw unavailable();
        },
        {
          firstDelayMs: 20,
          maxDelayMs: 20,
          forMs: 50,
          retryable: isStoreUnavailable,
          onRetry: (_error, delayMs) => clock.advance(delayMs),
          clock,
        },
      ),
    ).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    // Waits of 20 ms fit twice into 50 ms: three attempts.
    expect(calls).toBe(3);
  });

  it('ends a wait when its signal aborts, with the signal reason', async () => {
    const controller = new AbortController();
    const reason = new Error('stopping');
    const pending = retrying(
      async () => {
        throw unavailable();
      },
      {
        firstDelayMs: 60_000,
        maxDelayMs: 60_000,
        forMs: 600_000,
        retryable: isStoreUnavailable,
        onRetry: () => controller.abort(reason),
        signal: controller.signal,
      },
    );
    await expect(pending).rejects.toBe(reason);
  });
});
