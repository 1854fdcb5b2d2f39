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
 * Per-node timers, counters and gauges kept in process (the engine's metrics layer). Keys carry their labels
 * inline (`node.executions{node=a,status=success}`) so the snapshot is plain JSON for `inspect` and the CLI.
 */
export interface WorkflowMetrics {
  recordDuration(name: string, label: string, ms: number): void;
  increment(name: string, label: string, by?: number): void;
  setGauge(name: string, value: number): void;
  snapshot(): MetricsSnapshot;
}

export function createWorkflowMetrics(): WorkflowMetrics {
  // By name, then by label: the caller's strings are looked up as they are, where a joined key would be
  // a new string to build and hash on every stage.
  const timers = new Map<
    string,
    Map<string, { count: number; totalMs: number; minMs: number; maxMs: number }>
  >();
  const counters = new Map<string, Map<string, { value: number }>>();
  const gauges = new Map<string, number>();
  const family = <T>(families: Map<string, Map<string, T>>, name: string): Map<string, T> => {
    let entries = families.get(name);
    if (!entries) {
      entries = new Map();
      families.set(name, entries);
    }
    return entries;
  };
  return {
    recordDuration(name, label, ms) {
      const entries = family(timers, name);
      const timer = entries.get(label);
      if (timer) {
        timer.count++;
        timer.totalMs += ms;
        if (ms < timer.minMs) timer.minMs = ms;
        if (ms > timer.maxMs) timer.maxMs = ms;
      } else entries.set(label, { count: 1, totalMs: ms, minMs: ms, maxMs: ms });
    },
    increment(name, label, by = 1) {
      const entries = family(counters, name);
      const counter = entries.get(label);
      if (counter) counter.value += by;
      else entries.set(label, { value: by });
    },
    setGauge(name, value) {
      gauges.set(name, value);
    },
    snapshot() {
      const timerOut: Record<string, TimerSummary> = {};
      for (const [name, entries] of timers)
        for (const [label, timer] of entries)
          timerOut[`${name}{${label}}`] = { ...timer, meanMs: timer.totalMs / timer.count };
      const counterOut: Record<string, number> = {};
      for (const [name, entries] of counters)
        for (const [label, counter] of entries) counterOut[`${name}{${label}}`] = counter.value;
      return { timers: timerOut, counters: counterOut, gauges: Object.fromEntries(gauges) };
    },
  };
}
