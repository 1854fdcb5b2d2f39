import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, createMetricsRegistry, createRedactor } from '../../src/telemetry/index.js';

function captureStream(): { stream: Writable; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  return { stream, text: () => chunks.join('') };
}

describe('redaction', () => {
  it('removes planted secrets from log lines, nested objects and errors', () => {
    const secret = 'sk-planted-secret-123';
    const redactor = createRedactor([secret]);
    const { stream, text } = captureStream();
    const logger = createLogger({ redactor, destination: stream, level: 'debug' });
    logger.info(
      { url: `https://x/?key=${secret}`, nested: { list: [secret] }, apiKey: 'other' },
      `message ${secret}`,
    );
    logger.error({ err: new Error(`failed with ${secret}`) }, 'boom');
    const output = text();
    expect(output).not.toContain(secret);
    expect(output).not.toContain('"other"');
    expect(output).toContain('[REDACTED]');
    expect(output.split('\n').filter(Boolean)).toHaveLength(2);
  });

  it('redacts secrets added later', () => {
    const redactor = createRedactor();
    redactor.addSecret('late-token-value');
    expect(redactor.redactText('a late-token-value b')).toBe('a [REDACTED] b');
  });
});

describe('child loggers', () => {
  it("write their bindings and their parents', redacted, and only at the levels the logger lets through", () => {
    const secret = 'sk-child-secret-456';
    const { stream, text } = captureStream();
    const logger = createLogger({ redactor: createRedactor([secret]), destination: stream, level: 'warn' });
    const run = logger.child({ runId: 'run-1' });
    const tool = run.child({ tool: 'http_fetch', token: secret });
    run.info({ step: 'hidden' }, 'below the level');
    run.debug({ step: 'hidden' }, 'below the level');
    run.warn({ step: 1 }, 'run line');
    tool.error({ step: 2 }, 'tool line');
    const lines = text()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ runId: 'run-1', step: 1, msg: 'run line', level: 40 });
    expect(lines[0]).not.toHaveProperty('tool');
    expect(lines[1]).toMatchObject({
      runId: 'run-1',
      tool: 'http_fetch',
      step: 2,
      msg: 'tool line',
      level: 50,
    });
    expect(text()).not.toContain(secret);
  });
});

describe('metrics registry', () => {
  it('renders counters, gauges and histograms in Prometheus text format', () => {
    const registry = createMetricsRegistry();
    const counter = registry.counter('agentd_turns_total', 'Chat turns');
    counter.inc({ status: 'completed' });
    counter.inc({ status: 'completed' }, 2);
    registry.gauge('agentd_queue_depth', 'Queued work items', () => 7);
    const histogram = registry.histogram('agentd_response_seconds', 'Response latency', [0.1, 1]);
    histogram.observe(0.05);
    histogram.observe(0.5);
    const text = registry.render();
    expect(text).toContain('agentd_turns_total{status="completed"} 3');
    expect(text).toContain('agentd_queue_depth 7');
    expect(text).toContain('agentd_response_seconds_bucket{le="0.1"} 1');
    expect(text).toContain('agentd_response_seconds_bucket{le="1"} 2');
    expect(text).toContain('agentd_response_seconds_count 2');
    expect(() => registry.counter('agentd_turns_total', 'again')).toThrow(/twice/);
  });
});
