import { context, ROOT_CONTEXT, SpanStatusCode, trace } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { activeContext, isTraced, runInSpan, startSpan, withSpan } from '../../src/telemetry/index.js';
import { UserInputError } from '../../src/util/index.js';
import { useTracing } from './otel-harness.js';

describe('span helpers without a tracer provider', () => {
  it('hand out no-op spans and run the work without switching context', async () => {
    const span = startSpan('anything');
    expect(isTraced(span)).toBe(false);
    const seen = await runInSpan(span, async () => context.active());
    expect(seen).toBe(ROOT_CONTEXT);
    expect(await withSpan('outer', {}, async () => trace.getActiveSpan())).toBeUndefined();
  });
});

describe('span helpers with a tracer provider', () => {
  const tracing = useTracing();

  it('make spans started inside `runInSpan` children, across awaits', async () => {
    const parent = startSpan('parent');
    expect(isTraced(parent)).toBe(true);
    await runInSpan(parent, async () => {
      await new Promise((resolve) => setImmediate(resolve));
      await withSpan('child', {}, async () => undefined);
    });
    parent.end();
    expect(tracing.span('child').parentSpanContext?.spanId).toBe(parent.spanContext().spanId);
  });

  it('parent work that starts later on the context captured when it was accepted', async () => {
    let accepted: ReturnType<typeof activeContext> | undefined;
    const request = startSpan('request');
    runInSpan(request, () => {
      accepted = activeContext();
    });
    request.end();
    // Runs outside the request's context, as a queued job does.
    await withSpan('job', { parent: accepted! }, async () => undefined);
    await withSpan('timer pass', { root: true, parent: accepted! }, async () => undefined);
    expect(tracing.span('job').parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(tracing.span('timer pass').parentSpanContext).toBeUndefined();
  });

  it('mark a span failed with the error code only, and rethrow', async () => {
    const error = new UserInputError({ code: 'INVALID_REQUEST', message: 'secret-ish detail sk-123' });
    await expect(
      withSpan('failing', {}, async () => {
        throw error;
      }),
    ).rejects.toBe(error);
    const span = tracing.span('failing');
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'INVALID_REQUEST' });
    expect(span.attributes['error.type']).toBe('INVALID_REQUEST');
    expect(JSON.stringify(span.attributes)).not.toContain('sk-123');
    expect(span.events).toEqual([]);
  });
});
