export { createLogRing, type LogRing, type LogTail } from './log-ring.js';
export { type CreateLoggerOptions, createLogger } from './logger.js';
export {
  type Counter,
  createMetricsRegistry,
  type Gauge,
  type Histogram,
  type Labels,
  type MetricsRegistry,
} from './metrics.js';
export { startTelemetry, type TelemetryHandle } from './otel.js';
export { createRedactor, type Redactor } from './redact.js';
export {
  type CreateSloMetricsOptions,
  createSloMetrics,
  type RecallOutcome,
  type SloMetrics,
  type WorkerType,
} from './slo-metrics.js';
export {
  activeContext,
  type Context,
  errorCodeOf,
  isTraced,
  markSpanFailed,
  runInSpan,
  type Span,
  SpanAttributes,
  type StartSpanOptions,
  startSpan,
  tracerName,
  withSpan,
} from './tracing.js';
