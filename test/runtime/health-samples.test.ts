import { afterEach, describe, expect, it, vi } from 'vitest';
import { createHealthSampler } from '../../src/runtime/health-samples.js';
import { silentLogger } from '../../src/util/index.js';

describe('health samples', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('samples on an interval into a ring of the last hour, with turns, errors and p95 per interval', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] });
    let depth = 0;
    const sampler = createHealthSampler({
      clock: { now: () => Date.now() },
      logger: silentLogger,
      intervalMs: 10_000,
      capacity: 360,
      gauges: async () => ({ queueDepth: depth, activeRuns: 1, agents: 2 }),
    });
    sampler.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(sampler.samples()).toHaveLength(1);
    for (const ms of [100, 200, 300, 400, 5_000]) sampler.observeTurn(ms, ms === 5_000);
    depth = 7;
    await vi.advanceTimersByTimeAsync(10_000);
    const second = sampler.samples()[1]!;
    expect(second).toMatchObject({
      queueDepth: 7,
      activeRuns: 1,
      agents: 2,
      turns: 5,
      errors: 1,
      responseP95Ms: 5_000,
    });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(sampler.samples()[2]).toMatchObject({ turns: 0, errors: 0, responseP95Ms: null });
    // An hour and more: the ring keeps the newest 360.
    await vi.advanceTimersByTimeAsync(400 * 10_000);
    const samples = sampler.samples();
    expect(samples).toHaveLength(360);
    expect(samples.at(-1)!.at - samples[0]!.at).toBe(359 * 10_000);
    sampler.stop();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sampler.samples().at(-1)).toEqual(samples.at(-1));
  });
});
