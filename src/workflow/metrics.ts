export interface TimerSummary {
  count: number;
  totalMs: number;
  minMs: number;
  maxMs: number;
  meanMs: number;
}

export interface MetricsSnapshot {
  /** `node.duration_ms{node=draft}` → summary. */
  timers: Record<string, TimerSummary>;
  counters: Record<string, number>;
  gauges: Record<string, number>;
}

/**
 * Per-node timers, counters and gauges kept in process (the seed's metrics layer). Keys carry their labels
 * inline (`node.executions{node=a,status=success}`) so the snapshot is plain JSON for `inspect` and the CLI.
 */
export interface WorkflowMetrics {
  recordDuration(name: string, label: string, ms: number): void;
  increment(name: string, label: string, by?: number): void;
  setGauge(name: string, value: number): void;
  snapshot(): MetricsSnapshot;
}

export function createWorkflowMetrics(): WorkflowMetrics {
  const timers = new Map<string, { count: number; totalMs: number; minMs: number; maxMs: number }>();
  const counters = new Map<string, number>();
  const gauges = new Map<string, number>();
  return {
    recordDuration(name, label, ms) {
      const key = `${name}{${label}}`;
      const timer = timers.get(key);
      if (timer) {
        timer.count++;
        timer.totalMs += ms;
        if (ms < timer.minMs) timer.minMs = ms;
        if (ms > timer.maxMs) timer.maxMs = ms;
      } else timers.set(key, { count: 1, totalMs: ms, minMs: ms, maxMs: ms });
    },
    increment(name, label, by = 1) {
      const key = `${name}{${label}}`;
      counters.set(key, (counters.get(key) ?? 0) + by);
    },
    setGauge(name, value) {
      gauges.set(name, value);
    },
    snapshot() {
      const timerOut: Record<string, TimerSummary> = {};
      for (const [key, timer] of timers) timerOut[key] = { ...timer, meanMs: timer.totalMs / timer.count };
      return { timers: timerOut, counters: Object.fromEntries(counters), gauges: Object.fromEntries(gauges) };
    },
  };
}
