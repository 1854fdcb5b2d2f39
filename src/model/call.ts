import type { Attributes, Span, Tracer } from '@opentelemetry/api';
import type { AbortSource, Logger } from '../util/index.js';
import {
  createSignalWatchers,
  sleep as defaultSleep,
  ErrorCodes,
  noopSpan,
  registeredOtelApi,
  SpanKind,
  SpanStatusCode,
  signalOf,
} from '../util/index.js';
import { abortedError, errorEvent, timeoutError } from './provider-errors.js';
import type {
  LanguageModel,
  ModelCallOptions,
  ModelMessage,
  ModelRequest,
  ModelResponse,
  ModelStopReason,
  ModelStreamError,
  ModelStreamEvent,
  ModelToolCall,
  ModelUsage,
} from './spec.js';

export interface ModelRetryOptions {
  /** Attempts in total, including the first. 1 disables retries. Default 3. */
  maxAttempts?: number;
  /** Delay before the second attempt; doubles for each further attempt. Default 500. */
  initialDelayMs?: number;
  /** Upper bound for one delay (also caps a provider's `retry-after`). Default 8000. */
  maxDelayMs?: number;
  /** Randomise each delay to between 50% and 100% of its value, so clients do not retry in lockstep. Default true. */
  jitter?: boolean;
}

export interface StreamModelOptions {
  /** Ends the call with ABORTED. A LazyAbortController is watched without making its signal. */
  signal?: AbortSource;
  /** Per attempt: when it expires the provider call is aborted and the attempt ends with PROVIDER_TIMEOUT. */
  timeoutMs?: number;
  retry?: ModelRetryOptions;
  /** Backoff sleep, injectable for tests. Must reject when the signal aborts. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Source of jitter in [0, 1). */
  random?: () => number;
  /** Called once per `usage` event that reaches the caller (one per successful call). */
  onUsage?: (usage: ModelUsage, model: LanguageModel) => void;
  /** Defaults to the global API's `trace.getTracer('agentd')`, a no-op until an OpenTelemetry SDK is registered. */
  tracer?: Tracer;
  logger?: Logger;
}

const defaultRetry = { maxAttempts: 3, initialDelayMs: 500, maxDelayMs: 8000, jitter: true };

/** Characters per token in the estimate. English prose with common tokenizers averages close to 4. */
const charsPerToken = 4;
/** Role markers and separators each chat message costs on top of its content. */
const tokensPerMessage = 4;

/**
 * A cheap, deterministic token estimate: `ceil(chars / 4)` for text; for a conversation the sum over
 * messages of `ceil(content / 4) + 4`, tool-call arguments included as JSON. It over-counts code and
 * under-counts CJK text; use it for budgets and thresholds, not billing.
 */
export function estimateTokens(input: string | readonly ModelMessage[]): number {
  if (typeof input === 'string') return Math.ceil(input.length / charsPerToken);
  let total = 0;
  for (const message of input) {
    let chars = message.content.length;
    if (message.role === 'assistant' && message.toolCalls) {
      for (const call of message.toolCalls) chars += call.name.length + JSON.stringify(call.arguments).length;
    }
    total += Math.ceil(chars / charsPerToken) + tokensPerMessage;
  }
  return total;
}

type Step = IteratorResult<ModelStreamEvent>;
type ErrorEvent = Extract<ModelStreamEvent, { type: 'error' }>;
const done: Step = { value: undefined, done: true };

/**
 * Streams one model call with retries, a per-attempt timeout, abort and a telemetry span.
 *
 * Guarantees to the caller:
 * - never throws; the stream ends with exactly one terminal event: `finish`, or `error` (then nothing else).
 *   Aborting through `signal` ends it with an `error` whose code is ABORTED (completeModel folds that into
 *   stopReason `aborted`); a timeout ends it with PROVIDER_TIMEOUT. This holds even for a provider that
 *   ignores its abort signal: the wrapper stops waiting for it.
 * - a retryable error is retried only while nothing has been passed to the caller, so no delta is repeated.
 * - a successful stream always carries one `usage` event before `finish`: the provider's, or an estimate
 *   (estimateTokens of the request and of the output) when the provider reported none.
 * - leaving the loop early (`break`, `return()`) aborts the provider call.
 */
export function streamModel(
  model: LanguageModel,
  request: ModelRequest,
  options: StreamModelOptions = {},
): AsyncIterableIterator<ModelStreamEvent> {
  return new ModelCall(model, request, options);
}

/** Takes the events of one model call as they come (`streamModelTo`). */
export interface ModelEventSink {
  onEvent(event: ModelStreamEvent): void;
}

/**
 * `streamModel` for a caller that takes every event as it comes: `sink.onEvent` is called synchronously
 * with each event, in order, with the same guarantees; the promise resolves after the terminal event. It
 * costs no promise or iterator result per event (the engage loop consumes each turn's call this way). If
 * `onEvent` throws, the provider call is aborted as on `return()` and the promise rejects with that error.
 */
export function streamModelTo(
  model: LanguageModel,
  request: ModelRequest,
  sink: ModelEventSink,
  options: StreamModelOptions = {},
): Promise<void> {
  return new ModelCall(model, request, options).drain(sink);
}

/**
 * A hand-written iterator rather than an async generator: per event it costs one promise and one
 * reaction on the provider's promise, which keeps the wrapper's share of a streamed chunk small
 * (see bench/model-overhead.bench.ts). `drain` serves the same state machine to a callback instead.
 *
 * The consumer waits either in `next()` (`waiting`) or in `drain()` (`sink`); `pulling` is set while it
 * waits on the provider's `next()`. Nothing here is a per-call closure under a name: the abort listener is
 * one per signal (`watch`), and the provider's `signal` is made the first time the provider asks for it.
 */
class ModelCall implements AsyncIterableIterator<ModelStreamEvent> {
  private readonly signal: AbortSource | undefined;
  private readonly retry: Required<ModelRetryOptions>;
  private readonly span: Span;
  /** Events decided by the wrapper itself (estimated usage, the terminal event), served before anything else. */
  private readonly queue: ModelStreamEvent[] = [];
  private state: 'idle' | 'streaming' | 'finished' = 'idle';
  private attempt = 0;
  private yielded = false;
  private usage: ModelUsage | undefined;
  private spanEnded = false;
  private waiting: ((step: Step | Promise<Step>) => void) | undefined;
  private sink: ModelEventSink | undefined;
  private drained: (() => void) | undefined;
  private drainFailed: ((error: unknown) => void) | undefined;
  private pulling = false;
  // Per attempt:
  private source: AsyncIterator<ModelStreamEvent> | undefined;
  /** Made when the provider first reads its signal; an attempt whose provider never does needs none. */
  private controller: AbortController | undefined;
  /** Set when the attempt was aborted before its provider read the signal: the signal is made aborted. */
  private abandoned: { reason: unknown } | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private reason: 'abort' | 'timeout' | undefined;
  private onStep: ((step: Step) => void) | undefined;
  private onThrow: ((error: unknown) => void) | undefined;
  private outputChars = 0;
  private attemptUsage: ModelUsage | undefined;

  constructor(
    private readonly model: LanguageModel,
    private readonly request: ModelRequest,
    private readonly options: StreamModelOptions,
  ) {
    this.signal = options.signal;
    this.retry = options.retry ? { ...defaultRetry, ...options.retry } : defaultRetry;
    this.span = startSpan(options.tracer ?? registeredOtelApi()?.trace.getTracer('agentd'), model, request);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<Step> {
    if (this.queue.length > 0) return Promise.resolve({ value: this.queue.shift()!, done: false });
    if (this.state === 'streaming') {
      if (this.reason) return this.continued(this.endAttempt(this.interruptEvent()));
      return new Promise<Step>((resolve) => {
        this.waiting = resolve;
        this.pull();
      });
    }
    if (this.state === 'finished') return Promise.resolve(done);
    this.startAttempt();
    return this.next();
  }

  return(): Promise<Step> {
    if (this.state === 'streaming') {
      // The caller stopped listening: cancel the provider call and let it unwind in the background.
      this.abortAttempt(undefined);
      this.source?.return?.().catch(() => {});
      this.closeAttempt();
    }
    this.markFinished();
    this.queue.length = 0;
    this.endSpan(undefined);
    return Promise.resolve(done);
  }

  drain(sink: ModelEventSink): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.sink = sink;
      this.drained = resolve;
      this.drainFailed = reject;
      this.pump();
    });
  }

  /** Drain mode: hands the sink everything available now, then waits on the provider (or is done). */
  private pump(): void {
    for (;;) {
      if (this.queue.length > 0) {
        if (!this.emit(this.queue.shift()!)) return;
      } else if (this.state === 'finished') {
        this.drained!();
        return;
      } else if (this.state === 'idle') this.startAttempt();
      else if (this.reason) {
        const backoff = this.endAttempt(this.interruptEvent());
        if (backoff) {
          this.resume(backoff);
          return;
        }
      } else {
        this.pull();
        return;
      }
    }
  }

  /** Gives the sink one event; a sink that throws ends the call as `return()` does and fails the drain. */
  private emit(event: ModelStreamEvent): boolean {
    try {
      this.sink!.onEvent(event);
      return true;
    } catch (error) {
      this.return();
      this.drainFailed!(error);
      return false;
    }
  }

  private pull(): void {
    this.pulling = true;
    this.source!.next().then(this.onStep, this.onThrow);
  }

  /** The provider's event the consumer was waiting for. */
  private deliver(event: ModelStreamEvent): void {
    if (this.sink) {
      if (this.emit(event)) this.pump();
      return;
    }
    const resolve = this.waiting!;
    this.waiting = undefined;
    resolve({ value: event, done: false });
  }

  /** The attempt ended while the consumer waited: it goes on now, or after the retry's backoff. */
  private resume(backoff: Promise<void> | undefined): void {
    if (this.sink) {
      if (backoff) backoff.then(() => this.pump());
      else this.pump();
      return;
    }
    const resolve = this.waiting!;
    this.waiting = undefined;
    resolve(this.continued(backoff));
  }

  private continued(backoff: Promise<void> | undefined): Promise<Step> {
    return backoff ? backoff.then(() => this.next()) : this.next();
  }

  private startAttempt(): void {
    if (this.signal?.aborted) {
      this.finish(errorEvent(abortedError()));
      return;
    }
    const attempt = ++this.attempt;
    this.state = 'streaming';
    this.reason = undefined;
    this.outputChars = 0;
    this.attemptUsage = undefined;
    this.controller = undefined;
    this.abandoned = undefined;
    if (this.signal) ModelCall.watching.add(this.signal, this);
    if (this.options.timeoutMs !== undefined)
      this.timer = setTimeout(() => this.interrupt('timeout'), this.options.timeoutMs);
    // Results of an attempt that was already given up (interrupted) must not leak into the next one.
    this.onStep = (step) => {
      if (attempt === this.attempt && this.pulling) this.takeStep(step);
    };
    this.onThrow = (error) => {
      if (attempt === this.attempt && this.pulling) {
        this.pulling = false;
        this.resume(this.endAttempt(this.brokenContract(error)));
      }
    };
    try {
      this.source = this.model
        .doStream(this.request, new AttemptOptions(this, attempt))
        [Symbol.asyncIterator]();
    } catch (error) {
      // doStream threw instead of returning a stream: surface it through the normal path.
      this.source = { next: () => Promise.reject(error) };
    }
  }

  /**
   * The signal of attempt `attempt`, made on first use: Node's AbortController costs more than the rest of
   * an in-process model's turn, and a provider that never looks at its signal needs none. The signal aborts
   * exactly as an eagerly made one would: on `return()`, abort and timeout, also when read after them.
   */
  signalOf(attempt: number): AbortSignal {
    // An earlier attempt: the wrapper has given up on it.
    if (attempt !== this.attempt) return AbortSignal.abort();
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abandoned) this.controller.abort(this.abandoned.reason);
    }
    return this.controller.signal;
  }

  /** Whether attempt `attempt` has been given up, as its signal would say, without making the signal. */
  attemptAborted(attempt: number): boolean {
    if (attempt !== this.attempt) return true;
    return this.controller ? this.controller.signal.aborted : this.abandoned !== undefined;
  }

  private abortAttempt(reason: unknown): void {
    if (this.controller) this.controller.abort(reason);
    else this.abandoned = { reason };
  }

  private takeStep(step: Step): void {
    this.pulling = false;
    if (step.done) {
      this.resume(
        this.endAttempt(
          errorEvent({
            code: ErrorCodes.providerError,
            message: `${this.model.provider}/${this.model.modelId} ended its stream without a finish event.`,
            retryable: false,
          }),
        ),
      );
      return;
    }
    const event = step.value;
    switch (event.type) {
      case 'text-delta':
        this.outputChars += event.text.length;
        break;
      case 'finish':
      case 'error':
        this.resume(this.endAttempt(event));
        return;
      case 'usage':
        this.attemptUsage = event.usage;
        this.options.onUsage?.(event.usage, this.model);
        break;
    }
    this.yielded = true;
    this.deliver(event);
  }

  /** The calls streaming under each caller signal, interrupted when it aborts. */
  private static readonly watching = createSignalWatchers<ModelCall>((call) => call.interrupt('abort'));

  private interrupt(why: 'abort' | 'timeout'): void {
    if (this.state !== 'streaming' || this.reason) return;
    this.reason = why;
    this.abortAttempt(why === 'abort' ? this.signal?.reason : new Error('model call timed out'));
    if (this.pulling) {
      this.pulling = false;
      this.resume(this.endAttempt(this.interruptEvent()));
    }
  }

  private interruptEvent(): ErrorEvent {
    return errorEvent(
      this.reason === 'abort' ? abortedError() : timeoutError(this.options.timeoutMs ?? 0),
    ) as ErrorEvent;
  }

  private brokenContract(error: unknown): ModelStreamEvent {
    // A provider broke the never-throw contract; the caller still gets a well-formed stream.
    const message = error instanceof Error ? error.message : String(error);
    return errorEvent({
      code: ErrorCodes.providerError,
      message: `${this.model.provider}/${this.model.modelId} failed: ${message}`,
      retryable: false,
    });
  }

  private closeAttempt(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.signal) ModelCall.watching.remove(this.signal, this);
  }

  /**
   * The attempt ended with `end`: finish (the terminal event is queued) or retry. Returns the retry's
   * backoff, after which the call is ready for its next attempt (or finished, when the backoff was aborted).
   */
  private endAttempt(end: ModelStreamEvent): Promise<void> | undefined {
    this.closeAttempt();
    if (this.reason) {
      this.source?.return?.().catch(() => {});
      end = this.interruptEvent();
    }
    if (end.type === 'finish') {
      if (this.attemptUsage === undefined) {
        this.attemptUsage = {
          inputTokens: estimateTokens(this.request.messages),
          outputTokens: Math.ceil(this.outputChars / charsPerToken),
        };
        this.options.onUsage?.(this.attemptUsage, this.model);
        this.queue.push({ type: 'usage', usage: this.attemptUsage });
      }
      this.usage = this.attemptUsage;
      this.finish(end);
      return undefined;
    }
    const error = (end as ErrorEvent).error;
    const retryable =
      error.retryable &&
      !this.yielded &&
      this.attempt < Math.max(1, Math.floor(this.retry.maxAttempts)) &&
      this.reason !== 'abort' &&
      !this.signal?.aborted;
    if (!retryable) {
      this.finish(end);
      return undefined;
    }
    this.state = 'idle';
    const delayMs = backoffDelay(this.attempt, this.retry, error, this.options.random ?? Math.random);
    this.options.logger?.warn(
      {
        provider: this.model.provider,
        model: this.model.modelId,
        attempt: this.attempt,
        code: error.code,
        delayMs,
      },
      'model call failed; retrying',
    );
    this.span.addEvent('retry', { attempt: this.attempt, 'error.type': error.code, delay_ms: delayMs });
    return (this.options.sleep ?? defaultSleep)(delayMs, this.signal && signalOf(this.signal)).then(
      () => {},
      () => this.finish(errorEvent(abortedError())),
    );
  }

  private finish(terminal: ModelStreamEvent): void {
    this.markFinished();
    this.queue.push(terminal);
    this.endSpan(terminal);
  }

  /**
   * Every way a call ends goes through here. Nothing reads the provider's iterator or the callbacks on its
   * promises after that; dropped, they no longer keep this call (with its request and messages) alive: with
   * them, every call's objects survived young-generation collections until a full one
   * (docs/decisions/0026-no-per-call-getter-literals.md).
   */
  private markFinished(): void {
    this.state = 'finished';
    this.source = undefined;
    this.onStep = undefined;
    this.onThrow = undefined;
  }

  private endSpan(terminal: ModelStreamEvent | undefined): void {
    if (this.spanEnded) return;
    this.spanEnded = true;
    endSpan(this.span, terminal, this.usage);
  }
}

/**
 * What an attempt's provider gets: its `signal` is made on first read, and reading `aborted` makes none. A
 * class, not a literal with getters: such a literal, made per call, kept its getters' closures and all they
 * reach (the whole call, its request and messages) alive through every young-generation collection until the
 * next full one (docs/decisions/0026-no-per-call-getter-literals.md).
 */
class AttemptOptions implements ModelCallOptions {
  constructor(
    private readonly call: ModelCall,
    private readonly attempt: number,
  ) {}

  get signal(): AbortSignal {
    return this.call.signalOf(this.attempt);
  }

  get aborted(): boolean {
    return this.call.attemptAborted(this.attempt);
  }
}

function backoffDelay(
  attempt: number,
  retry: Required<ModelRetryOptions>,
  error: ModelStreamError,
  random: () => number,
): number {
  let delay = Math.min(retry.maxDelayMs, retry.initialDelayMs * 2 ** (attempt - 1));
  if (retry.jitter) delay = delay * (0.5 + random() * 0.5);
  if (error.retryAfterMs !== undefined)
    delay = Math.max(delay, Math.min(error.retryAfterMs, retry.maxDelayMs));
  return Math.round(delay);
}

/** Runs `streamModel` to the end and folds the events. Never throws. */
export async function completeModel(
  model: LanguageModel,
  request: ModelRequest,
  options: StreamModelOptions = {},
): Promise<ModelResponse> {
  const folded = new FoldedResponse();
  await streamModelTo(model, request, folded, options);
  const { text, toolCalls, usage, stopReason, error } = folded;
  return error ? { text, toolCalls, usage, stopReason, error } : { text, toolCalls, usage, stopReason };
}

/** completeModel's fold of the events. */
class FoldedResponse implements ModelEventSink {
  text = '';
  readonly toolCalls: ModelToolCall[] = [];
  usage: ModelUsage = { inputTokens: 0, outputTokens: 0 };
  stopReason: ModelStopReason = 'error';
  error: ModelStreamError | undefined;

  onEvent(event: ModelStreamEvent): void {
    switch (event.type) {
      case 'text-delta':
        this.text += event.text;
        break;
      case 'tool-call':
        this.toolCalls.push(event.toolCall);
        break;
      case 'usage':
        this.usage = event.usage;
        break;
      case 'finish':
        this.stopReason = event.stopReason;
        break;
      case 'error':
        this.error = event.error;
        this.stopReason = event.error.code === ErrorCodes.aborted ? 'aborted' : 'error';
        break;
    }
  }
}

function startSpan(tracer: Tracer | undefined, model: LanguageModel, request: ModelRequest): Span {
  if (tracer === undefined) return noopSpan;
  const attributes: Attributes = {
    'gen_ai.operation.name': 'chat',
    'gen_ai.system': model.provider,
    'gen_ai.provider.name': model.provider,
    'gen_ai.request.model': model.modelId,
  };
  if (request.maxTokens !== undefined) attributes['gen_ai.request.max_tokens'] = request.maxTokens;
  if (request.temperature !== undefined) attributes['gen_ai.request.temperature'] = request.temperature;
  if (typeof request.metadata?.purpose === 'string')
    attributes['agentd.model.purpose'] = request.metadata.purpose;
  return tracer.startSpan(`chat ${model.modelId}`, { kind: SpanKind.CLIENT, attributes });
}

function endSpan(span: Span, terminal: ModelStreamEvent | undefined, usage: ModelUsage | undefined): void {
  if (usage) {
    span.setAttribute('gen_ai.usage.input_tokens', usage.inputTokens);
    span.setAttribute('gen_ai.usage.output_tokens', usage.outputTokens);
  }
  if (terminal?.type === 'finish') {
    span.setAttribute('gen_ai.response.finish_reasons', [terminal.stopReason]);
  } else if (terminal?.type === 'error') {
    const aborted = terminal.error.code === ErrorCodes.aborted;
    span.setAttribute('gen_ai.response.finish_reasons', [aborted ? 'aborted' : 'error']);
    span.setAttribute('error.type', terminal.error.code);
    span.setStatus({ code: SpanStatusCode.ERROR, message: terminal.error.message });
  }
  span.end();
}
