import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  MeterProvider,
  MetricReader,
  type ResourceMetrics,
} from '@opentelemetry/sdk-metrics';
import { describe, expect, it } from 'vitest';
import { createMetricsRegistry, createSloMetrics } from '../../src/telemetry/index.js';

/** A reader that collects on demand, as an exporter's reader does on its interval. */
class OnDemandReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

function metricsByName(collected: ResourceMetrics): Map<string, DataPoint<unknown>[]> {
  const found = new Map<string, DataPoint<unknown>[]>();
  for (const scope of collected.scopeMetrics)
    for (const metric of scope.metrics)
      found.set(metric.descriptor.name, metric.dataPoints as DataPoint<unknown>[]);
  return found;
}

describe('SLO metrics', () => {
  it('records latency, recall outcomes, errors by worker type and queue depth as OpenTelemetry metrics and on /metrics', async () => {
    const reader = new OnDemandReader({
      aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE,
    });
    const provider = new MeterProvider({ readers: [reader] });
    const registry = createMetricsRegistry();
    const slo = createSloMetrics({ meter: provider.getMeter('agentd'), registry });

    slo.recordResponse(0.4, 'completed');
    slo.recordResponse(0.8, 'completed');
    slo.recordResponse(12, 'error');
    slo.recordRecall('hit');
    slo.recordRecall('hit');
    slo.recordRecall('empty');
    slo.recordRecall('error');
    slo.recordError('chat', 'PROVIDER_TIMEOUT');
    slo.recordError('work', 'TOOL_FAILED', { 'agentd.work_item.kind': 'task' });
    slo.recordError('work', 'TOOL_FAILED', { 'agentd.work_item.kind': 'task' });
    slo.setQueueDepth(7);

    const { resourceMetrics, errors } = await reader.collect();
    expect(errors).toEqual([]);
    const metrics = metricsByName(resourceMetrics);

    const latency = metrics.get('agentd.response.duration')!;
    const completed = latency.find((point) => point.attributes['agentd.run.status'] === 'completed')!;
    const histogram = completed.value as Histogram;
    expect(histogram.count).toBe(2);
    expect(histogram.sum).toBeCloseTo(1.2);
    // The advised boundaries (seconds), so a backend's p95 lands between meaningful bounds.
    expect(histogram.buckets.boundaries.slice(0, 6)).toEqual([0.05, 0.1, 0.25, 0.5, 1, 2]);
    expect(histogram.buckets.counts.slice(0, 6)).toEqual([0, 0, 0, 1, 1, 0]);

    const recalls = metrics.get('agentd.memory.recalls')!;
    const recallCount = (outcome: string) =>
      recalls.find((point) => point.attributes['agentd.recall.outcome'] === outcome)?.value;
    expect([recallCount('hit'), recallCount('empty'), recallCount('error')]).toEqual([2, 1, 1]);

    const errorPoints = metrics.get('agentd.errors')!.map((point) => [point.attributes, point.value]);
    expect(errorPoints).toEqual(
      expect.arrayContaining([
        [{ 'agentd.worker.type': 'chat', 'error.type': 'PROVIDER_TIMEOUT' }, 1],
        [{ 'agentd.worker.type': 'work', 'error.type': 'TOOL_FAILED', 'agentd.work_item.kind': 'task' }, 2],
      ]),
    );
    expect(metrics.get('agentd.work.queue.depth')!.map((point) => point.value)).toEqual([7]);

    slo.setQueueDepth(3);
    const again = metricsByName((await reader.collect()).resourceMetrics);
    expect(again.get('agentd.work.queue.depth')!.map((point) => point.value)).toEqual([3]);

    const text = registry.render();
    expect(text).toContain('agentd_response_seconds_count{status="completed"} 2');
    expect(text).toContain('agentd_response_seconds_bucket{status="error",le="15"} 1');
    expect(text).toContain('agentd_recalls_total{outcome="hit"} 2');
    expect(text).toContain('agentd_worker_errors_total{worker_type="work",code="TOOL_FAILED"} 2');
    expect(text).toContain('agentd_queue_depth 3');
    await provider.shutdown();
  });
});
