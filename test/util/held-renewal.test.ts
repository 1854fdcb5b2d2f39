import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { createHeldRenewal } from '../../src/util/index.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

it('renews every interval while held, not again while one is in flight, and stops its timer once nothing is held', async () => {
  let renewals = 0;
  let finish: (() => void) | undefined;
  const renewal = createHeldRenewal({
    intervalMs: 100,
    renew: () => {
      renewals++;
      return new Promise<void>((resolve) => {
        finish = resolve;
      });
    },
  });
  renewal.hold();
  renewal.hold();
  expect(renewal.holding()).toBe(true);
  await vi.advanceTimersByTimeAsync(100);
  expect(renewals).toBe(1);
  // The first is still in flight at the next tick.
  await vi.advanceTimersByTimeAsync(100);
  expect(renewals).toBe(1);
  finish?.();
  await vi.advanceTimersByTimeAsync(100);
  expect(renewals).toBe(2);
  finish?.();

  renewal.release();
  expect(renewal.holding()).toBe(true);
  renewal.release();
  renewal.release();
  expect(renewal.holding()).toBe(false);
  // The tick with nothing held stops the timer; none is left behind.
  await vi.advanceTimersByTimeAsync(100);
  expect(vi.getTimerCount()).toBe(0);
  await vi.advanceTimersByTimeAsync(1_000);
  expect(renewals).toBe(2);

  // Held again: renewing again.
  renewal.hold();
  await vi.advanceTimersByTimeAsync(100);
  expect(renewals).toBe(3);
  const stopped = renewal.stop();
  let done = false;
  void stopped.then(() => {
    done = true;
  });
  await vi.advanceTimersByTimeAsync(0);
  expect(done).toBe(false);
  finish?.();
  await stopped;
  expect(vi.getTimerCount()).toBe(0);
});
