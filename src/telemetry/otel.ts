import type { Logger } from '../util/index.js';

export interface TelemetryHandle {
  /** True when an OpenTelemetry SDK was started from OTEL_* variables. */
  enabled: boolean;
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry Node SDK when the standard variables ask for it (`OTEL_EXPORTER_OTLP_ENDPOINT`,
 * `OTEL_TRACES_EXPORTER`, `OTEL_METRICS_EXPORTER`); otherwise the global API stays a no-op and costs nothing.
 * The SDK is imported lazily so a run without OTEL_* never loads it.
 */
export async function startTelemetry(options: {
  env?: NodeJS.ProcessEnv;
  logger: Logger;
  serviceVersion: string;
}): Promise<TelemetryHandle> {
  const env = options.env ?? process.env;
  const wanted =
    Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) ||
    (env.OTEL_TRACES_EXPORTER !== undefined && env.OTEL_TRACES_EXPORTER !== 'none') ||
    (env.OTEL_METRICS_EXPORTER !== undefined && env.OTEL_METRICS_EXPORTER !== 'none');
  if (!wanted || env.OTEL_SDK_DISABLED === 'true') return { enabled: false, shutdown: async () => {} };
  let NodeSDK: typeof import('@opentelemetry/sdk-node').NodeSDK;
  try {
    ({ NodeSDK } = await import('@opentelemetry/sdk-node'));
  } catch (error) {
    // An optional dependency: installs with `--omit=optional` do not have it.
    options.logger.warn(
      { err: error },
      'OTEL_* variables ask for OpenTelemetry, but the optional package @opentelemetry/sdk-node cannot be loaded (npm install @opentelemetry/sdk-node); telemetry stays off',
    );
    return { enabled: false, shutdown: async () => {} };
  }
  const sdk = new NodeSDK({ serviceName: env.OTEL_SERVICE_NAME ?? 'agentd', autoDetectResources: false });
  sdk.start();
  options.logger.info(
    { serviceVersion: options.serviceVersion },
    'OpenTelemetry SDK started from OTEL_* variables',
  );
  return {
    enabled: true,
    shutdown: async () => {
      await sdk
        .shutdown()
        .catch((error: unknown) => options.logger.warn({ err: error }, 'OpenTelemetry shutdown failed'));
    },
  };
}
