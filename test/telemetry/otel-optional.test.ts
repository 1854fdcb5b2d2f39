import { describe, expect, it, vi } from 'vitest';
import { startTelemetry } from '../../src/telemetry/index.js';
import { createRecordingLogger } from '../../src/util/index.js';

// What an install with `--omit=optional` looks like to the lazy import.
vi.mock('@opentelemetry/sdk-node', () => {
  throw new Error("Cannot find package '@opentelemetry/sdk-node'");
});

describe('OpenTelemetry SDK as an optional dependency', () => {
  it('keeps running with telemetry off and names the package when OTEL_* asks for it', async () => {
    const logger = createRecordingLogger();
    const handle = await startTelemetry({
      env: { OTEL_TRACES_EXPORTER: 'console' },
      logger,
      serviceVersion: '0.0.0',
    });
    expect(handle.enabled).toBe(false);
    await handle.shutdown();
    expect(
      logger.records.some(
        (record) =>
          record.level === 'warn' && record.message?.includes('npm install @opentelemetry/sdk-node'),
      ),
    ).toBe(true);
  });
});
