import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { createRecordingLogger, createRefusedWrites } from '../../src/util/index.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

function keeper(maxKept = 10) {
  const retries: number[] = [];
  const logger = createRecordingLogger();
  const refused = createRefusedWrites<number>({
    retry: () => retries.push(Date.now()),
    firstRetryMs: 100,
    maxRetryMs: 400,
    maxKept,
    logger,
    what: 'test rows',
  });
  return { refused, retries, logs: logger.records };
}

it('puts what was refused ahead of the next batch, once', () => {
  const { refused } = keeper();
  expect(refused.withKept([1])).toEqual([1]);
  refused.refuse([1, 2], new Error('full'));
  expect(refused.kept).toBe(2);
  expect(refused.withKept([3])).toEqual([1, 2, 3]);
  expect(refused.kept).toBe(0);
  expect(refused.withKept([4])).toEqual([4]);
  refused.stop();
});

it('retries after a delay that doubles up to the most, and starts over once a batch is written', () => {
  const { refused, retries } = keeper();
  const retriesAfter = (delayMs: number) => {
    refused.refuse(refused.withKept([]), new Error('full'));
    vi.advanceTimersByTime(delayMs - 1);
    const early = retries.length;
    vi.advanceTimersByTime(1);
    return retries.length - early;
  };
  refused.refuse([1], new Error('full'));
  vi.advanceTimersByTime(100);
  expect(retries).toHaveLength(1);
  // Each refusal after a retry waits twice as long, up to maxRetryMs (400).
  expect([retriesAfter(200), retriesAfter(400), retriesAfter(400)]).toEqual([1, 1, 1]);
  expect(refused.kept).toBe(1);
  refused.written();
  expect(retriesAfter(100)).toBe(1);
  refused.stop();
});

it('keeps the newest maxKept writes and says how many it dropped', () => {
  const { refused, logs } = keeper(3);
  refused.refuse([1, 2, 3, 4, 5], new Error('full'));
  expect(refused.withKept([])).toEqual([3, 4, 5]);
  expect(logs.some((line) => line.level === 'error' && line.object?.writes === 2)).toBe(true);
  refused.stop();
});

it('arms no retry after stop', () => {
  const { refused, retries } = keeper();
  refused.refuse([1], new Error('full'));
  refused.stop();
  vi.advanceTimersByTime(10_000);
  expect(retries).toEqual([]);
  expect(refused.kept).toBe(1);
});

it('says at give-up how many writes are lost, and keeps none', () => {
  const { refused, logs } = keeper();
  refused.refuse([1, 2], new Error('full'));
  refused.stop();
  refused.giveUp();
  expect(refused.kept).toBe(0);
  expect(logs.filter((line) => line.level === 'error').map((line) => line.object?.lost)).toEqual([2]);
  refused.giveUp();
  expect(logs.filter((line) => line.level === 'error')).toHaveLength(1);
});
