import { describe, expect, it } from 'vitest';
import type { LanguageModel, ModelRequest, ModelStreamEvent } from '../../src/model/index.js';

/**
 * How to make a provider behave for the conformance suite. Each factory is called once per test and
 * returns a model whose next call does what the name says; a provider that cannot be made to fail leaves
 * `failing` out and says why in `cannotFail`.
 */
export interface ModelSpecSubject {
  /** The next call streams some text, then finishes. */
  succeeding(): LanguageModel | Promise<LanguageModel>;
  /** The next call fails upstream (an HTTP error, a crashing CLI, a scripted error). */
  failing?(): LanguageModel | Promise<LanguageModel>;
  /** Why `failing` is missing. */
  cannotFail?: string;
  /** The next call sends nothing (or streams without end) until it is aborted; for a model that always answers
   * at once, a succeeding one: the suite aborts at the first event too. */
  hanging(): LanguageModel | Promise<LanguageModel>;
  /** Whether a successful call reports token usage (CLIs in plain-text mode do not). */
  reportsUsage: boolean;
  /** Whether the model has `prepare` (the providers that load an SDK at their first call). */
  prepares: boolean;
  /** Cleanup after each test (fake servers checked and closed, processes reaped). */
  afterEach?(): Promise<void>;
}

const request: ModelRequest = {
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Say hello.' },
  ],
};

/** Drains a stream; a throw from the provider is returned, never rethrown, so the test can assert on it. */
async function drain(
  stream: AsyncIterable<ModelStreamEvent>,
  onEvent?: (event: ModelStreamEvent) => void,
): Promise<{ events: ModelStreamEvent[]; thrown: unknown }> {
  const events: ModelStreamEvent[] = [];
  try {
    for await (const event of stream) {
      events.push(event);
      onEvent?.(event);
    }
    return { events, thrown: undefined };
  } catch (error) {
    return { events, thrown: error };
  }
}

/** Exactly one `finish` or `error`, and it is the last event. */
function expectOneTerminalLast(events: ModelStreamEvent[]) {
  const terminal = events.filter((event) => event.type === 'finish' || event.type === 'error');
  expect(terminal).toHaveLength(1);
  expect(events.at(-1)).toBe(terminal[0]);
}

/**
 * The model spec v1 contract (src/model/spec.ts), run against one provider the way describeEachDatabase
 * runs the store tests against each database: streams never throw, a failure is an `error` event and the
 * last one, an abort ends the stream with `ABORTED`, usage comes before `finish`.
 */
export function describeModelSpec(name: string, subject: ModelSpecSubject): void {
  const run = async <T>(body: () => Promise<T>) => {
    try {
      return await body();
    } finally {
      await subject.afterEach?.();
    }
  };

  describe(`model spec v1: ${name}`, () => {
    it('identifies itself as a v1 model', () =>
      run(async () => {
        const model = await subject.succeeding();
        await drain(model.doStream(request, {}));
        expect(model.specificationVersion).toBe('v1');
        expect(model.provider).toMatch(/^[a-z][a-z0-9-]*$/);
        expect(model.modelId.length).toBeGreaterThan(0);
        expect(model.contextWindowTokens).toBeGreaterThan(0);
      }));

    it('streams text, then usage (when it reports any), then one finish as the last event', () =>
      run(async () => {
        const model = await subject.succeeding();
        const { events, thrown } = await drain(model.doStream(request, {}));
        expect(thrown).toBeUndefined();
        expectOneTerminalLast(events);
        expect(events.at(-1)?.type).toBe('finish');
        expect(events.some((event) => event.type === 'text-delta' && event.text.length > 0)).toBe(true);
        const usage = events.findIndex((event) => event.type === 'usage');
        if (subject.reportsUsage) expect(usage).toBeGreaterThanOrEqual(0);
        if (usage >= 0) {
          expect(usage).toBeLessThan(events.length - 1);
          const reported = events[usage] as Extract<ModelStreamEvent, { type: 'usage' }>;
          expect(reported.usage.inputTokens).toBeGreaterThanOrEqual(0);
          expect(reported.usage.outputTokens).toBeGreaterThanOrEqual(0);
        }
      }));

    it('prepares, when it can, without calling the provider: the next call answers as usual', () =>
      run(async () => {
        const model = await subject.succeeding();
        expect(typeof model.prepare === 'function').toBe(subject.prepares);
        // Twice, as a runtime may: a call made by either would take the one answer the next call expects.
        await model.prepare?.();
        await model.prepare?.();
        const { events, thrown } = await drain(model.doStream(request, {}));
        expect(thrown).toBeUndefined();
        expectOneTerminalLast(events);
        expect(events.at(-1)?.type).toBe('finish');
        expect(events.some((event) => event.type === 'text-delta' && event.text.length > 0)).toBe(true);
      }));

    it.skipIf(!subject.failing)(
      `ends a failed call with an error event, never a throw${subject.cannotFail ? ` (skipped: ${subject.cannotFail})` : ''}`,
      () =>
        run(async () => {
          const model = await subject.failing!();
          const { events, thrown } = await drain(model.doStream(request, {}));
          expect(thrown).toBeUndefined();
          expectOneTerminalLast(events);
          const last = events.at(-1) as Extract<ModelStreamEvent, { type: 'error' }>;
          expect(last.type).toBe('error');
          expect(last.error.code).toMatch(/^[A-Z][A-Z0-9_]*$/);
          expect(last.error.message.length).toBeGreaterThan(0);
          expect(typeof last.error.retryable).toBe('boolean');
          expect(last.error.code).not.toBe('ABORTED');
        }),
    );

    it('ends a call aborted while it runs with ABORTED as the last event', () =>
      run(async () => {
        const model = await subject.hanging();
        const controller = new AbortController();
        const stream = model.doStream(request, { signal: controller.signal });
        const aborter = setTimeout(() => controller.abort(), 200);
        const { events, thrown } = await drain(stream, () => controller.abort());
        clearTimeout(aborter);
        expect(thrown).toBeUndefined();
        expectOneTerminalLast(events);
        expect(events.at(-1)).toMatchObject({ type: 'error', error: { code: 'ABORTED' } });
      }));

    it('ends a call whose signal is already aborted with ABORTED, without a throw', () =>
      run(async () => {
        const model = await subject.hanging();
        const controller = new AbortController();
        controller.abort();
        const { events, thrown } = await drain(model.doStream(request, { signal: controller.signal }));
        expect(thrown).toBeUndefined();
        expectOneTerminalLast(events);
        expect(events.at(-1)).toMatchObject({ type: 'error', error: { code: 'ABORTED' } });
      }));
  });
}
