import type * as OtelApi from '@opentelemetry/api';
import { lazyPackage } from './lazy-package.js';

/**
 * Where the OpenTelemetry API keeps what was registered with it (tracer, meter and context providers),
 * shared by every copy of the API's major version 1 in a process: `@opentelemetry/api`'s
 * `internal/global-utils`. test/util/otel-api.test.ts checks that registering a provider creates it.
 */
const registryKey = Symbol.for('opentelemetry.js.api.1');

const loadApi = lazyPackage<typeof OtelApi>('@opentelemetry/api');
let loaded: typeof OtelApi | undefined;

/**
 * The OpenTelemetry API once anything in the process has registered with it (the SDK that `OTEL_*`
 * variables start, a library user's own SDK, a test), else undefined. Until then every span is a no-op and
 * every context the root one, which is what the API itself answers then; the API's 45 files are not loaded
 * (about 30 ms of a command's start here). Asked per span, so a provider registered later takes effect.
 */
export function registeredOtelApi(): typeof OtelApi | undefined {
  if (loaded === undefined && (globalThis as Record<symbol, unknown>)[registryKey] !== undefined)
    loaded = loadApi();
  return loaded;
}

const invalidSpanContext: OtelApi.SpanContext = {
  traceId: '00000000000000000000000000000000',
  spanId: '0000000000000000',
  traceFlags: 0,
};

/** The span of an untraced process: records nothing, as the API's non-recording span of an invalid context. */
export const noopSpan: OtelApi.Span = {
  spanContext: () => invalidSpanContext,
  setAttribute: () => noopSpan,
  setAttributes: () => noopSpan,
  addEvent: () => noopSpan,
  addLink: () => noopSpan,
  addLinks: () => noopSpan,
  setStatus: () => noopSpan,
  updateName: () => noopSpan,
  end: () => {},
  isRecording: () => false,
  recordException: () => {},
};

/**
 * The root context of an untraced process: holds nothing. A span started later under it, once an API is
 * registered, is a root span, as under the API's own root context.
 */
export const rootContext: OtelApi.Context = {
  getValue: () => undefined,
  setValue: (key, value) => loadApi().ROOT_CONTEXT.setValue(key, value),
  deleteValue: () => rootContext,
};

/** `SpanKind`, `SpanStatusCode` and `ValueType` values without loading the API (the API's numeric enums). */
export type SpanKind = OtelApi.SpanKind;
export const SpanKind = {
  INTERNAL: 0,
  SERVER: 1,
  CLIENT: 2,
  PRODUCER: 3,
  CONSUMER: 4,
} as const satisfies Record<keyof typeof OtelApi.SpanKind, OtelApi.SpanKind>;
export type SpanStatusCode = OtelApi.SpanStatusCode;
export const SpanStatusCode = { UNSET: 0, OK: 1, ERROR: 2 } as const satisfies Record<
  keyof typeof OtelApi.SpanStatusCode,
  OtelApi.SpanStatusCode
>;
export type ValueType = OtelApi.ValueType;
export const ValueType = { INT: 0, DOUBLE: 1 } as const satisfies Record<
  keyof typeof OtelApi.ValueType,
  OtelApi.ValueType
>;
