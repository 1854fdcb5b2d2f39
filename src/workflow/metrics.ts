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
  /**
   * `recordDuration(name, label, ms)` as a function of `ms`, for a caller that records into the same timer
   * on every stage: the timer is looked up (or made) at its first record, then kept.
   */
  timer(name: string, label: string): (ms: number) => void;
  /** `increment(name, label, by)` as a function of `by`, in the same way as `timer`. */
  counter(name: string, label: string): (by?: number) => void;
  snapshot(): MetricsSnapshot;
}

interface Timer {
  count: number;
  totalMs: number;
  minMs: number;
  maxMs: number;
}

export function createWorkflowMetrics(): WorkflowMetrics {
  // By name, then by label: the caller's strings are looked up as they are, where a joined key would be
  // a new string to build and hash on every stage.
  const timers = new Map<string, Map<string, Timer>>();
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
  /** Records `ms` into the timer, or makes it with `ms` as its first record: gives the timer. */
  const record = (name: string, label: string, ms: number): Timer => {
    const entries = family(timers, name);
    let timer = entries.get(label);
    if (timer) addDuration(timer, ms);
    else {
      timer = { count: 1, totalMs: ms, minMs: ms, maxMs: ms };
      entries.set(label, timer);
    }
    return timer;
  };
  const add = (name: string, label: string, by: number): { value: number } => {
    const entries = family(counters, name);
    let counter = entries.get(label);
    if (counter) counter.value += by;
    else {
      counter = { value: by };
      entries.set(label, counter);
    }
    return counter;
  };
  return {
    recordDuration(name, label, ms) {
      record(name, label, ms);
    },
    increment(name, label, by = 1) {
      add(name, label, by);
    },
    timer(name, label) {
      let timer: Timer | undefined;
      return (ms) => {
        if (timer) addDuration(timer, ms);
        else timer = record(name, label, ms);
      };
    },
    counter(name, label) {
      let counter: { value: number } | undefined;
      return (by = 1) => {
        if (counter) counter.value += by;
        else counter = add(name, label, by);
      };
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

function addDuration(timer: Timer, ms: number): void {
  timer.count++;
  timer.totalMs += ms;
  if (ms < timer.minMs) timer.minMs = ms;
  if (ms > timer.maxMs) timer.maxMs = ms;
}
