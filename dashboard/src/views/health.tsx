import { useState } from 'preact/hooks';
import { errorText, useGateway, usePolling } from '../context.js';

interface Sample {
  at: number;
  queueDepth: number;
  activeRuns: number;
  agents: number;
  turns: number;
  errors: number;
  responseP95Ms: number | null;
  heapUsedMb: number;
}

const charts: Array<{ key: keyof Sample; label: string; unit: string }> = [
  { key: 'responseP95Ms', label: 'Response time p95', unit: 'ms' },
  { key: 'turns', label: 'Chat turns', unit: 'per sample' },
  { key: 'errors', label: 'Errors', unit: 'per sample' },
  { key: 'queueDepth', label: 'Queue depth', unit: 'items' },
  { key: 'activeRuns', label: 'Active runs', unit: 'runs' },
  { key: 'heapUsedMb', label: 'Heap used', unit: 'MB' },
];

function Sparkline(props: { samples: Sample[]; field: keyof Sample; label: string; unit: string }) {
  const width = 280;
  const height = 70;
  const hourAgo = Date.now() - 3_600_000;
  const points = props.samples
    .filter((sample) => sample.at >= hourAgo && typeof sample[props.field] === 'number')
    .map((sample) => ({ at: sample.at, value: sample[props.field] as number }));
  const max = Math.max(1, ...points.map((point) => point.value));
  const x = (at: number) => ((at - hourAgo) / 3_600_000) * width;
  const y = (value: number) => height - 4 - (value / max) * (height - 10);
  const line = points
    .map(
      (point, index) => `${index === 0 ? 'M' : 'L'} ${x(point.at).toFixed(1)} ${y(point.value).toFixed(1)}`,
    )
    .join(' ');
  const last = points.at(-1);
  const area =
    points.length > 1
      ? `${line} L ${x(points.at(-1)!.at).toFixed(1)} ${height} L ${x(points[0]!.at).toFixed(1)} ${height} Z`
      : '';
  return (
    <figure class="card chart">
      <figcaption>
        <span>{props.label}</span>
        <b>
          {last ? `${Math.round(last.value * 10) / 10}` : '—'} <span class="muted small">{props.unit}</span>
        </b>
      </figcaption>
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-label={`${props.label} over the last hour`}>
        <line x1="0" x2={width} y1={height - 1} y2={height - 1} class="axis" />
        {area && <path d={area} class="area" />}
        {line && <path d={line} class="line" />}
        {points.length === 1 && <circle cx={x(points[0]!.at)} cy={y(points[0]!.value)} r="3" class="dot" />}
      </svg>
      <div class="muted small row between">
        <span>1 h ago</span>
        <span>max {Math.round(max * 10) / 10}</span>
        <span>now</span>
      </div>
    </figure>
  );
}

export function HealthView() {
  const gateway = useGateway();
  const [status, setStatus] = useState<any>();
  const [samples, setSamples] = useState<Sample[]>([]);
  const [error, setError] = useState('');
  usePolling(() => {
    gateway.call('status').then(setStatus, (failure) => setError(errorText(failure)));
    gateway.call('health.samples').then(
      (result) => setSamples(result.samples),
      (failure) => setError(errorText(failure)),
    );
  }, 10_000);
  const work = status?.work as Record<string, number> | undefined;
  return (
    <div class="stack">
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <section class="tiles" aria-label="Status">
        <div class="card tile">
          <span class="muted small">Status</span>
          <b class={status?.status === 'ok' ? 'ok' : 'warn'} id="health-status">
            {status?.status ?? '…'}
          </b>
        </div>
        <div class="card tile">
          <span class="muted small">Store</span>
          <b id="health-store">{status?.store?.mode ?? '…'}</b>
          <span class="muted small">{status?.store?.persistent ? 'persistent' : 'not persistent'}</span>
        </div>
        <div class="card tile">
          <span class="muted small">Model</span>
          <b id="health-model">{status?.model?.name ?? '…'}</b>
        </div>
        <div class="card tile">
          <span class="muted small">Queue depth</span>
          <b id="health-queue">{work ? (work.queued ?? 0) + (work.running ?? 0) : '…'}</b>
          <span class="muted small">
            {work
              ? Object.entries(work)
                  .map(([state, count]) => `${state} ${count}`)
                  .join(' · ')
              : ''}
          </span>
        </div>
        <div class="card tile">
          <span class="muted small">Uptime</span>
          <b>{status ? `${Math.round(status.uptimeMs / 60_000)} min` : '…'}</b>
          <span class="muted small">v{status?.version}</span>
        </div>
      </section>
      <section class="charts" aria-label="Last hour">
        {charts.map((chart) => (
          <Sparkline
            key={chart.key}
            samples={samples}
            field={chart.key}
            label={chart.label}
            unit={chart.unit}
          />
        ))}
      </section>
    </div>
  );
}
