/**
 * A small Prometheus registry (text exposition format 0.0.4) for `/metrics`. The SLO metrics
 * (response latency, queue depth, recall success, errors by worker type) are registered by the runtime.
 */
export type Labels = Record<string, string>;

interface Series {
  labels: Labels;
  value: number;
}

interface HistogramSeries {
  labels: Labels;
  buckets: number[];
  sum: number;
  count: number;
}

export interface Counter {
  inc(labels?: Labels, by?: number): void;
}
export interface Gauge {
  set(value: number, labels?: Labels): void;
}
export interface Histogram {
  observe(value: number, labels?: Labels): void;
}

export interface MetricsRegistry {
  counter(name: string, help: string): Counter;
  gauge(name: string, help: string, collect?: () => number): Gauge;
  histogram(name: string, help: string, buckets?: number[]): Histogram;
  render(): string;
}

const defaultBucketsSeconds = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

function labelKey(labels: Labels): string {
  return Object.keys(labels)
    .sort()
    .map((key) => `${key}=${labels[key]}`)
    .join(',');
}

function renderLabels(labels: Labels, extra?: Labels): string {
  const all = { ...labels, ...extra };
  const keys = Object.keys(all);
  if (keys.length === 0) return '';
  return `{${keys.map((key) => `${key}="${String(all[key]).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`).join(',')}}`;
}

export function createMetricsRegistry(): MetricsRegistry {
  const renderers: Array<() => string> = [];
  const names = new Set<string>();
  const claim = (name: string) => {
    if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(name)) throw new RangeError(`invalid metric name ${name}`);
    if (names.has(name)) throw new RangeError(`metric ${name} registered twice`);
    names.add(name);
  };

  return {
    counter(name, help) {
      claim(name);
      const series = new Map<string, Series>();
      renderers.push(() =>
        [
          `# HELP ${name} ${help}`,
          `# TYPE ${name} counter`,
          ...[...series.values()].map((s) => `${name}${renderLabels(s.labels)} ${s.value}`),
        ].join('\n'),
      );
      return {
        inc(labels = {}, by = 1) {
          const key = labelKey(labels);
          const existing = series.get(key);
          if (existing) existing.value += by;
          else series.set(key, { labels, value: by });
        },
      };
    },
    gauge(name, help, collect) {
      claim(name);
      const series = new Map<string, Series>();
      renderers.push(() => {
        if (collect) series.set('', { labels: {}, value: collect() });
        return [
          `# HELP ${name} ${help}`,
          `# TYPE ${name} gauge`,
          ...[...series.values()].map((s) => `${name}${renderLabels(s.labels)} ${s.value}`),
        ].join('\n');
      });
      return {
        set(value, labels = {}) {
          series.set(labelKey(labels), { labels, value });
        },
      };
    },
    histogram(name, help, buckets = defaultBucketsSeconds) {
      claim(name);
      const sorted = [...buckets].sort((a, b) => a - b);
      const series = new Map<string, HistogramSeries>();
      renderers.push(() => {
        const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} histogram`];
        for (const s of series.values()) {
          sorted.forEach((bound, index) => {
            lines.push(`${name}_bucket${renderLabels(s.labels, { le: String(bound) })} ${s.buckets[index]}`);
          });
          lines.push(`${name}_bucket${renderLabels(s.labels, { le: '+Inf' })} ${s.count}`);
          lines.push(`${name}_sum${renderLabels(s.labels)} ${s.sum}`);
          lines.push(`${name}_count${renderLabels(s.labels)} ${s.count}`);
        }
        return lines.join('\n');
      });
      return {
        observe(value, labels = {}) {
          const key = labelKey(labels);
          let s = series.get(key);
          if (!s) {
            s = { labels, buckets: sorted.map(() => 0), sum: 0, count: 0 };
            series.set(key, s);
          }
          for (let index = 0; index < sorted.length; index++)
            if (value <= sorted[index]!) s.buckets[index]!++;
          s.sum += value;
          s.count++;
        },
      };
    },
    render: () => `${renderers.map((render) => render()).join('\n')}\n`,
  };
}
