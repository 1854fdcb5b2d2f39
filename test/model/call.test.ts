import { getEventListeners } from 'node:events';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { completeModel, estimateTokens, streamModel, streamModelTo } from '../../src/model/call.js';
import { createLocalModel } from '../../src/model/local.js';
import type {
  LanguageModel,
  ModelCallOptions,
  ModelRequest,
  ModelStreamEvent,
} from '../../src/model/spec.js';
import { createScriptedModel, type ScriptedModel } from '../../src/testing.js';
import { createRecordingLogger } from '../../src/util/logger.js';
import { collect } from './helpers.js';

const request: ModelRequest = { messages: [{ role: 'user', content: 'question?' }] };
const rateLimited = { code: 'PROVIDER_RATE_LIMITED', retryable: true };

describe('streamModel / completeModel', () => {
  let model: ScriptedModel;
  afterEach(() => model.assertAllConsumed());

  it('retries a retryable error that happened before anything was yielded, with exponential backoff', async () => {
    model = createScriptedModel({
      steps: [{ error: rateLimited }, { error: rateLimited }, { text: ['a', 'b'] }],
    });
    const delays: number[] = [];
    const logger = createRecordingLogger();
    const response = await completeModel(model, request, {
      retry: { initialDelayMs: 100, maxDelayMs: 150, jitter: false },
      sleep: async (ms) => {
        delays.push(ms);
      },
      logger,
    });
    expect(response).toEqual({
      text: 'ab',
      toolCalls: [],
      usage: { inputTokens: 0, outputTokens: 0 },
      stopReason: 'end_turn',
    });
    expect(delays).toEqual([100, 150]);
    expect(logger.records.filter((record) => record.message === 'model call failed; retrying')).toHaveLength(
      2,
    );
  });

  it('never retries once a delta reached the caller, so nothing is duplicated', async () => {
    model = createScriptedModel({ steps: [{ text: 'partial', error: rateLimited }] });
    const events = await collect(streamModel(model, request, { sleep: async () => {} }));
    expect(events).toEqual([
      { type: 'text-delta', text: 'partial' },
      { type: 'error', error: expect.objectContaining({ code: 'PROVIDER_RATE_LIMITED' }) },
    ]);
  });

  it('honours retry-after over a shorter backoff, capped by maxDelayMs', async () => {
    model = createScriptedModel({
      steps: [{ error: { ...rateLimited, retryAfterMs: 60_000 } }, { text: 'ok' }],
    });
    const delays: number[] = [];
    await completeModel(model, request, {
      retry: { initialDelayMs: 10, maxDelayMs: 5000 },
      sleep: async (ms) => {
        delays.push(ms);
      },
    });
    expect(delays).toEqual([5000]);
  });

  it('stops after maxAttempts and returns the last error', async () => {
    model = createScriptedModel({
      steps: [{ error: rateLimited }, { error: { ...rateLimited, message: 'second' } }],
    });
    const response = await completeModel(model, request, {
      retry: { maxAttempts: 2 },
      sleep: async () => {},
    });
    expect(response.stopReason).toBe('error');
    expect(response.error).toMatchObject({ code: 'PROVIDER_RATE_LIMITED', message: 'second' });
  });

  it('ends with ABORTED and no finish when aborted during a hang, and an aborted backoff also ends with ABORTED', async () => {
    model = createScriptedModel({ steps: [{ hang: true }, { error: rateLimited }] });
    const controller = new AbortController();
    const events: ModelStreamEvent[] = [];
    const iteration = (async () => {
      for await (const event of streamModel(model, request, { signal: controller.signal }))
        events.push(event);
    })();
    await vi.waitFor(() => expect(model.requests).toHaveLength(1));
    controller.abort();
    await iteration;
    expect(events).toEqual([
      { type: 'error', error: { code: 'ABORTED', message: expect.any(String), retryable: false } },
    ]);

    const backoff = new AbortController();
    const response = await completeModel(model, request, {
      signal: backoff.signal,
      sleep: (_ms, signal) =>
        new Promise((_resolve, reject) => {
          backoff.abort();
          reject(signal?.reason);
        }),
    });
    expect(response).toMatchObject({ stopReason: 'aborted', error: { code: 'ABORTED' } });
  });

  it('returns ABORTED at once for an already-aborted signal without calling the model', async () => {
    model = createScriptedModel();
    const response = await completeModel(model, request, { signal: AbortSignal.abort() });
    expect(response.stopReason).toBe('aborted');
    expect(model.requests).toHaveLength(0);
  });

  it('times out each attempt with PROVIDER_TIMEOUT and can retry it', async () => {
    model = createScriptedModel({ steps: [{ hang: true }, { text: 'late but fine' }] });
    const response = await completeModel(model, request, { timeoutMs: 20, sleep: async () => {} });
    expect(response).toMatchObject({ text: 'late but fine', stopReason: 'end_turn' });
    model.push({ hang: true });
    const timedOut = await completeModel(model, request, { timeoutMs: 20, retry: { maxAttempts: 1 } });
    expect(timedOut.error).toMatchObject({ code: 'PROVIDER_TIMEOUT', retryable: true });
  });

  it('aborts the provider when the caller stops iterating early', async () => {
    let sawAbort = false;
    const endless: LanguageModel = {
      specificationVersion: 'v1',
      provider: 'test',
      modelId: 'endless',
      contextWindowTokens: 1000,
      async *doStream(_request, { signal }) {
        signal?.addEventListener('abort', () => {
          sawAbort = true;
        });
        for (;;) yield { type: 'text-delta', text: 'x' };
      },
    };
    model = createScriptedModel();
    for await (const event of streamModel(endless, request)) {
      expect(event.type).toBe('text-delta');
      break;
    }
    expect(sawAbort).toBe(true);
  });

  it('turns a provider that throws or ends without finish into an error event', async () => {
    const throwing: LanguageModel = {
      specificationVersion: 'v1',
      provider: 'test',
      modelId: 'bad',
      contextWindowTokens: 1000,
      // biome-ignore lint/correctness/useYield: the point is a stream that throws before yielding
      async *doStream() {
        throw new Error('kaput');
      },
    };
    model = createScriptedModel({ steps: [{ events: [{ type: 'text-delta', text: 'x' }] }] });
    expect((await completeModel(throwing, request)).error).toMatchObject({
      code: 'PROVIDER_ERROR',
      message: expect.stringContaining('kaput'),
    });
    const unfinished = await completeModel(model, request);
    expect(unfinished.error?.message).toContain('without a finish event');
  });

  it('stops waiting for a provider that ignores its abort signal, on timeout and on abort', async () => {
    const deaf: LanguageModel = {
      specificationVersion: 'v1',
      provider: 'test',
      modelId: 'deaf',
      contextWindowTokens: 1000,
      doStream: () => ({ [Symbol.asyncIterator]: () => ({ next: () => new Promise<never>(() => {}) }) }),
    };
    model = createScriptedModel();
    const timedOut = await completeModel(deaf, request, {
      timeoutMs: 10,
      retry: { maxAttempts: 2 },
      sleep: async () => {},
    });
    expect(timedOut.error?.code).toBe('PROVIDER_TIMEOUT');
    const controller = new AbortController();
    const pending = completeModel(deaf, request, { signal: controller.signal });
    controller.abort();
    expect((await pending).stopReason).toBe('aborted');
  });

  it('turns a doStream that throws synchronously into an error event', async () => {
    const sync: LanguageModel = {
      specificationVersion: 'v1',
      provider: 'test',
      modelId: 'sync',
      contextWindowTokens: 1000,
      doStream: () => {
        throw new Error('bad config');
      },
    };
    model = createScriptedModel();
    expect((await completeModel(sync, request)).error?.message).toContain('bad config');
  });

  it('reports usage through onUsage, estimating it when the provider sent none', async () => {
    model = createScriptedModel({
      steps: [
        { text: 'abcdefgh', usage: null },
        { text: 'x', usage: { inputTokens: 7, outputTokens: 1 } },
      ],
    });
    const seen: Array<{ inputTokens: number; outputTokens: number }> = [];
    const estimated = await completeModel(model, request, { onUsage: (usage) => seen.push(usage) });
    expect(estimated.usage).toEqual({ inputTokens: estimateTokens(request.messages), outputTokens: 2 });
    await completeModel(model, request, { onUsage: (usage) => seen.push(usage) });
    expect(seen).toEqual([estimated.usage, { inputTokens: 7, outputTokens: 1 }]);
  });

  it('records one span per call with GenAI attributes', async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const tracer = provider.getTracer('agentd');
    model = createScriptedModel({
      modelId: 'm1',
      steps: [
        { text: 'hi', usage: { inputTokens: 3, outputTokens: 2 } },
        { error: { code: 'PROVIDER_AUTH' } },
      ],
    });
    await completeModel(model, { ...request, maxTokens: 50 }, { tracer });
    await completeModel(model, request, { tracer });
    const [ok, failed] = exporter.getFinishedSpans();
    expect(ok!.name).toBe('chat m1');
    expect(ok!.attributes).toMatchObject({
      'gen_ai.system': 'scripted',
      'gen_ai.request.model': 'm1',
      'gen_ai.request.max_tokens': 50,
      'gen_ai.usage.input_tokens': 3,
      'gen_ai.usage.output_tokens': 2,
      'gen_ai.response.finish_reasons': ['end_turn'],
    });
    expect(failed!.attributes['error.type']).toBe('PROVIDER_AUTH');
    expect(failed!.status.code).toBe(2);
  });
});

describe('streamModelTo', () => {
  const events: ModelStreamEvent[] = [
    { type: 'text-delta', text: 'a' },
    { type: 'tool-call', toolCall: { id: 'c1', name: 't', arguments: {} } },
    { type: 'usage', usage: { inputTokens: 1, outputTokens: 2 } },
    { type: 'finish', stopReason: 'tool_calls' },
  ];

  it('hands the sink the events streamModel yields, in order, and resolves after the terminal one', async () => {
    const model = createScriptedModel({ steps: [{ events }, { events }] });
    const taken: ModelStreamEvent[] = [];
    await streamModelTo(model, request, { onEvent: (event) => taken.push(event) });
    expect(taken).toEqual(await collect(streamModel(model, request)));
    expect(taken.at(-1)).toEqual({ type: 'finish', stopReason: 'tool_calls' });
  });

  it('aborts the provider call and rejects with the error when the sink throws', async () => {
    let providerSignal: AbortSignal | undefined;
    const endless: LanguageModel = {
      specificationVersion: 'v1',
      provider: 'test',
      modelId: 'endless',
      contextWindowTokens: 1000,
      async *doStream(_request, options) {
        providerSignal = options.signal;
        for (;;) yield { type: 'text-delta', text: 'x' };
      },
    };
    let taken = 0;
    const failing = streamModelTo(endless, request, {
      onEvent: () => {
        if (++taken === 3) throw new Error('sink failed');
      },
    });
    await expect(failing).rejects.toThrow('sink failed');
    expect(taken).toBe(3);
    expect(providerSignal?.aborted).toBe(true);
  });
});

describe('the provider signal', () => {
  /** A provider that reads its signal only when `read` is called, after doStream returned. */
  function lateReader() {
    let options: ModelCallOptions | undefined;
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const model: LanguageModel = {
      specificationVersion: 'v1',
      provider: 'test',
      modelId: 'late',
      contextWindowTokens: 1000,
      doStream(_request, callOptions) {
        options = callOptions;
        return (async function* () {
          yield { type: 'text-delta', text: 'x' } as const;
          await released;
          yield { type: 'finish', stopReason: 'end_turn' } as const;
        })();
      },
    };
    return { model, read: () => options!.signal!, aborted: () => options!.aborted, release };
  }

  /** Counts the AbortControllers made while `work` runs. */
  async function controllersMadeBy(work: () => Promise<unknown>): Promise<number> {
    let made = 0;
    class CountedAbortController extends AbortController {
      constructor() {
        super();
        made++;
      }
    }
    vi.stubGlobal('AbortController', CountedAbortController);
    try {
      await work();
    } finally {
      vi.unstubAllGlobals();
    }
    return made;
  }

  it('is made for a provider that reads it, and not for one that reads only `aborted`', async () => {
    const reader = lateReader();
    const readingSignal = controllersMadeBy(async () => {
      const stream = streamModel(reader.model, request);
      await stream.next();
      expect(reader.read().aborted).toBe(false);
      reader.release();
      await collect(stream);
    });
    expect(await readingSignal).toBe(1);

    const poller = lateReader();
    const readingAborted = controllersMadeBy(async () => {
      const stream = streamModel(poller.model, request);
      await stream.next();
      expect(poller.aborted()).toBe(false);
      poller.release();
      await collect(stream);
      expect(poller.aborted()).toBe(false);
    });
    expect(await readingAborted).toBe(0);
  });

  it('the local model, called through the wrapper, makes no AbortController', async () => {
    const made = await controllersMadeBy(() => completeModel(createLocalModel(), request));
    expect(made).toBe(0);
  });

  it('is aborted for a provider that reads it only after the caller stopped listening, as `aborted` says without it', async () => {
    const late = lateReader();
    const leaving = controllersMadeBy(async () => {
      for await (const _event of streamModel(late.model, request)) break;
      expect(late.aborted()).toBe(true);
    });
    expect(await leaving).toBe(0);
    expect(late.read().aborted).toBe(true);
  });

  it('carries the caller abort reason to a provider that reads it after the abort; `aborted` turns true with it', async () => {
    const late = lateReader();
    const controller = new AbortController();
    const taken: ModelStreamEvent[] = [];
    const aborting = controllersMadeBy(async () => {
      const call = streamModelTo(
        late.model,
        request,
        { onEvent: (event) => taken.push(event) },
        { signal: controller.signal },
      );
      await vi.waitFor(() => expect(taken).toHaveLength(1));
      expect(late.aborted()).toBe(false);
      controller.abort('stop now');
      await call;
      expect(late.aborted()).toBe(true);
    });
    // Until the provider reads its signal, none is made.
    expect(await aborting).toBe(0);
    expect(taken.at(-1)).toMatchObject({ type: 'error', error: { code: 'ABORTED' } });
    expect(late.read().aborted).toBe(true);
    expect(late.read().reason).toBe('stop now');
  });

  it('is not aborted while the call runs, and is the same signal on every read', async () => {
    const late = lateReader();
    const stream = streamModel(late.model, request);
    await stream.next();
    const signal = late.read();
    expect(signal.aborted).toBe(false);
    expect(late.read()).toBe(signal);
    late.release();
    await collect(stream);
    expect(signal.aborted).toBe(false);
  });

  it('calls made one after another under one caller signal leave one abort listener on it, not one each', async () => {
    const model = createScriptedModel({ steps: Array.from({ length: 15 }, () => ({ text: 'ok' })) });
    const controller = new AbortController();
    for (let index = 0; index < 15; index++) {
      await completeModel(model, request, { signal: controller.signal });
      expect(getEventListeners(controller.signal, 'abort').length).toBeLessThanOrEqual(1);
    }
    // The listener still serves a call that is streaming when the signal aborts.
    model.push({ hang: true });
    const pending = completeModel(model, request, { signal: controller.signal });
    controller.abort();
    expect((await pending).stopReason).toBe('aborted');
  });
});

describe('estimateTokens', () => {
  it('uses chars/4 for text and adds 4 per message', () => {
    expect(estimateTokens('')).toBe(0);
    expect(estimateTokens('abcde')).toBe(2);
    expect(
      estimateTokens([
        { role: 'user', content: 'abcd' },
        { role: 'assistant', content: '', toolCalls: [{ id: '1', name: 'ab', arguments: { a: 1 } }] },
      ]),
    ).toBe(1 + 4 + Math.ceil((2 + 7) / 4) + 4);
  });
});
