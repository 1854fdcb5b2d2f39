import type { Attributes, Meter } from '@opentelemetry/api';
import { registeredOtelApi, ValueType } from '../util/index.js';
import type { MetricsRegistry } from './metrics.js';
import { SpanAttributes, tracerName } from './tracing.js';

/** What answered a recall: memories found, nothing relevant, or a failure. Success is `hit` or `empty`. */
export type RecallOutcome = 'hit' | 'empty' | 'error';

/**
 * Where an error happened, by the kind of worker that ran into it: a chat run, a work item of the worker
 * pool, a workflow run, the memory manager, or the platform itself (`system:error`, e.g. the store).
 */
export type WorkerType = 'chat' | 'work' | 'workflow' | 'memory_manager' | 'system';

export interface SloMetrics {
  /** A chat message answered: seconds from the message to the end of its run, with the run's status. */
  recordResponse(seconds: number, status: string): void;
  recordRecall(outcome: RecallOutcome): void;
  /** `code` is the stable error code; `detail` adds bounded attributes (a work item's kind, a component). */
  recordError(workerType: WorkerType, code: string, detail?: Attributes): void;
  /** The latest work queue depth (queued + running items); observed at each collection. */
  setQueueDepth(depth: number): void;
}

export interface CreateSloMetricsOptions {
  /**
   * Defaults to the global meter, a no-op until an SDK registers a meter provider (before this call); none at
   * all (only `/metrics`) when nothing registered with the OpenTelemetry API before this call.
   */
  meter?: Meter;
  /** The Prometheus registry behind `/metrics`; the same values are rendered there. */
  registry?: MetricsRegistry;
}

/** Seconds: the response-time SLO is read as the p95 of this histogram, so the buckets bracket seconds. */
const responseBucketsSeconds = [0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 30, 60, 120];

/**
 * agentd's SLOs (p95 response latency, queue depth, recall success, errors by worker type) as
 * OpenTelemetry instruments, exported by whatever the `OTEL_*` variables set up, and as Prometheus series
 * on `/metrics`. One call records both, so the two views never disagree.
 *
 * OpenTelemetry names: `agentd.response.duration` (s), `agentd.work.queue.depth`, `agentd.memory.recalls`
 * (`agentd.recall.outcome`), `agentd.errors` (`agentd.worker.type`, `error.type`). Prometheus names:
 * `agentd_response_seconds{status}`, `agentd_queue_depth`, `agentd_recalls_total{outcome}`,
 * `agentd_worker_errors_total{worker_type,code}`.
 */
export function createSloMetrics(options: CreateSloMetricsOptions = {}): SloMetrics {
  let queueDepth = 0;
  const meter = options.meter ?? registeredOtelApi()?.metrics.getMeter(tracerName);
  const otel = meter && otelInstruments(meter, () => queueDepth);

  const registry = options.registry;
  const promResponse = registry?.histogram(
    'agentd_response_seconds',
    'Time from a chat message to the end of its run',
    responseBucketsSeconds,
  );
  const promRecalls = registry?.counter('agentd_recalls_total', 'Memory recalls by outcome');
  const promErrors = registry?.counter(
    'agentd_worker_errors_total',
    'Errors by worker type (chat, work, workflow, memory_manager, system) and code',
  );
  registry?.gauge('agentd_queue_depth', 'Work items queued or running', () => queueDepth);

  return {
    recordResponse(seconds, status) {
      otel?.response.record(seconds, { [SpanAttributes.runStatus]: status });
      promResponse?.observe(seconds, { status });
    },
    recordRecall(outcome) {
      otel?.recalls.add(1, { [SpanAttributes.recallOutcome]: outcome });
      promRecalls?.inc({ outcome });
    },
    recordError(workerType, code, detail) {
      otel?.errors.add(1, {
        ...detail,
        [SpanAttributes.workerType]: workerType,
        [SpanAttributes.errorType]: code,
      });
      promErrors?.inc({ worker_type: workerType, code });
    },
    setQueueDepth(depth) {
      queueDepth = depth;
    },
  };
}

function otelInstruments(meter: Meter, queueDepth: () => number) {
  const response = meter.createHistogram('agentd.response.duration', {
    description: 'Time from a chat message to the end of its run',
    unit: 's',
    advice: { explicitBucketBoundaries: responseBucketsSeconds },
  });
  const recalls = meter.createCounter('agentd.memory.recalls', {
    description: 'Memory recalls by outcome (hit, empty, error); success is hit + empty',
    valueType: ValueType.INT,
  });
  const errors = meter.createCounter('agentd.errors', {
    description: 'Errors by the type of worker that ran into them',
    valueType: ValueType.INT,
  });
  const depthGauge = meter.createObservableGauge('agentd.work.queue.depth', {
    description: 'Work items queued or running',
    valueType: ValueType.INT,
  });
  depthGauge.addCallback((result) => result.observe(queueDepth()));
  return { response, recalls, errors };
}
