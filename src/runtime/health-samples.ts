import { z } from 'zod';
import type { MethodTable } from '../gateway/index.js';
import { OperatorScopes } from '../gateway/index.js';
import type { Clock, Logger } from '../util/index.js';

/** One point of the health charts: gauges read at `at`, counts and latency over the interval before it. */
export interface HealthSample {
  at: number;
  /** Work items queued or running. */
  queueDepth: number;
  activeRuns: number;
  agents: number;
  /** Chat turns that ended in the interval, and how many of them failed. */
  turns: number;
  errors: number;
  /** 95th percentile of chat response time in the interval; null when no turn ended. */
  responseP95Ms: number | null;
  heapUsedMb: number;
}

export type HealthGauges = Pick<HealthSample, 'queueDepth' | 'activeRuns' | 'agents'>;

export interface HealthSampler {
  /** A chat turn ended after `durationMs`; `failed` counts it as an error too. */
  observeTurn(durationMs: number, failed: boolean): void;
  observeError(): void;
  /** Oldest first, at most the last hour (capacity × interval). */
  samples(): HealthSample[];
  /** Takes a sample now (tests; also the first one at start so charts are never empty). */
  sampleNow(): Promise<HealthSample>;
  start(): void;
  stop(): void;
}

function percentile95(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((left, right) => left - right);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.95) - 1)] ?? null;
}

/**
 * An in-process ring of health samples for the dashboard's charts. Kept in memory only: it answers "how has
 * the last hour looked" for this process, which is what the page shows; long-term series belong in /metrics.
 */
export function createHealthSampler(options: {
  gauges: () => Promise<HealthGauges>;
  clock: Clock;
  logger: Logger;
  intervalMs?: number;
  capacity?: number;
}): HealthSampler {
  const intervalMs = options.intervalMs ?? 10_000;
  const capacity = options.capacity ?? 360;
  const ring: HealthSample[] = [];
  let durations: number[] = [];
  let turns = 0;
  let errors = 0;
  let timer: NodeJS.Timeout | undefined;

  const sampleNow = async (): Promise<HealthSample> => {
    const gauges = await options.gauges();
    const sample: HealthSample = {
      at: options.clock.now(),
      ...gauges,
      turns,
      errors,
      responseP95Ms: percentile95(durations),
      heapUsedMb: Math.round((process.memoryUsage().heapUsed / 1024 / 1024) * 10) / 10,
    };
    durations = [];
    turns = 0;
    errors = 0;
    ring.push(sample);
    if (ring.length > capacity) ring.splice(0, ring.length - capacity);
    return sample;
  };

  return {
    observeTurn(durationMs, failed) {
      turns++;
      if (failed) errors++;
      // Bounded: a burst of turns inside one interval keeps only the most recent durations.
      durations.push(durationMs);
      if (durations.length > 10_000) durations.shift();
    },
    observeError() {
      errors++;
    },
    samples: () => [...ring],
    sampleNow,
    start() {
      if (timer) return;
      void sampleNow().catch((error: unknown) => options.logger.warn({ err: error }, 'health sample failed'));
      timer = setInterval(() => {
        sampleNow().catch((error: unknown) => options.logger.warn({ err: error }, 'health sample failed'));
      }, intervalMs);
      timer.unref();
    },
    stop() {
      clearInterval(timer);
      timer = undefined;
    },
  };
}

/** `health.samples`: the ring, for charts. `sinceMs` returns only newer samples (incremental polling). */
export function registerHealthSamplesMethod(methods: MethodTable, sampler: HealthSampler): void {
  methods.register('health.samples', {
    scopes: [OperatorScopes.read],
    params: z.object({ sinceMs: z.number().int().min(0).optional() }),
    handler: ({ sinceMs }) => ({
      samples: sampler.samples().filter((sample) => sinceMs === undefined || sample.at > sinceMs),
    }),
  });
}
