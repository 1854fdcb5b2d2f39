import { type Attributes, type Span, SpanKind, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import type { Logger } from '../util/index.js';
import { sleep as defaultSleep, ErrorCodes } from '../util/index.js';
import { abortedError, errorEvent, timeoutError } from './provider-errors.js';
import type {
  LanguageModel,
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
  signal?: AbortSignal;
  /** Per attempt: when it expires the provider call is aborted and the attempt ends with PROVIDER_TIMEOUT. */
  timeoutMs?: number;
  retry?: ModelRetryOptions;
  /** Backoff sleep, injectable for tests. Must reject when the signal aborts. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Source of jitter in [0, 1). */
  random?: () => number;
  /** Called once per `usage` event that reaches the caller (one per successful call). */
  onUsage?: (usage: ModelUsage, model: LanguageModel) => void;
  /** Defaults to `trace.getTracer('agentd')`, which is a no-op until an OpenTelemetry SDK is registered. */
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

/**
 * A hand-written iterator rather than an async generator: per event it costs one promise and one
 * reaction on the provider's promise, which keeps the wrapper's share of a streamed chunk small
 * (see bench/model-overhead.bench.ts).
 */
class ModelCall implements AsyncIterableIterator<ModelStreamEvent> {
  private readonly signal: AbortSignal | undefined;
  private readonly retry: Required<ModelRetryOptions>;
  private readonly span: Span;
  /** Events decided by the wrapper itself (estimated usage, the terminal event), served before anything else. */
  private readonly queue: ModelStreamEvent[] = [];
  private state: 'idle' | 'streaming' | 'finished' = 'idle';
  private attempt = 0;
  private yielded = false;
  private usage: ModelUsage | undefined;
  private spanEnded = false;
  // Per attempt:
  private source: AsyncIterator<ModelStreamEvent> | undefined;
  private controller: AbortController | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private reason: 'abort' | 'timeout' | undefined;
  private waiting: ((step: Step | Promise<Step>) => void) | undefined;
  private onStep: (step: Step) => void = () => {};
  private onThrow: (error: unknown) => void = () => {};
  private outputChars = 0;
  private attemptUsage: ModelUsage | undefined;

  constructor(
    private readonly model: LanguageModel,
    private readonly request: ModelRequest,
    private readonly options: StreamModelOptions,
  ) {
    this.signal = options.signal;
    this.retry = { ...defaultRetry, ...options.retry };
    this.span = startSpan(options.tracer ?? trace.getTracer('agentd'), model, request);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<Step> {
    if (this.queue.length > 0) return Promise.resolve({ value: this.queue.shift()!, done: false });
    if (this.state === 'streaming') {
      if (this.reason) return this.endAttempt(this.interruptEvent());
      return new Promise<Step>((resolve) => {
        this.waiting = resolve;
        this.source!.next().then(this.onStep, this.onThrow);
      });
    }
    if (this.state === 'finished') return Promise.resolve(done);
    this.startAttempt();
    return this.next();
  }

  return(): Promise<Step> {
    if (this.state === 'streaming') {
      // The caller stopped listening: cancel the provider call and let it unwind in the background.
      this.controller?.abort();
      this.source?.return?.().catch(() => {});
      this.closeAttempt();
    }
    this.state = 'finished';
    this.queue.length = 0;
    this.endSpan(undefined);
    return Promise.resolve(done);
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
    this.controller = new AbortController();
    this.signal?.addEventListener('abort', this.onAbort, { once: true });
    if (this.options.timeoutMs !== undefined) this.timer = setTimeout(this.onTimeout, this.options.timeoutMs);
    // Results of an attempt that was already given up (interrupted) must not leak into the next one.
    this.onStep = (step) => {
      if (attempt === this.attempt && this.waiting) this.handleStep(step);
    };
    this.onThrow = (error) => {
      if (attempt === this.attempt && this.waiting) this.settle(this.endAttempt(this.brokenContract(error)));
    };
    try {
      this.source = this.model
        .doStream(this.request, { signal: this.controller.signal })
        [Symbol.asyncIterator]();
    } catch (error) {
      // doStream threw instead of returning a stream: surface it through the normal path.
      this.source = { next: () => Promise.reject(error) };
    }
  }

  private handleStep(step: Step): void {
    if (step.done) {
      this.settle(
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
        this.settle(this.endAttempt(event));
        return;
      case 'usage':
        this.attemptUsage = event.usage;
        this.options.onUsage?.(event.usage, this.model);
        break;
    }
    this.yielded = true;
    this.settle({ value: event, done: false });
  }

  private settle(step: Step | Promise<Step>): void {
    const resolve = this.waiting;
    this.waiting = undefined;
    resolve?.(step);
  }

  private readonly onAbort = () => this.interrupt('abort');
  private readonly onTimeout = () => this.interrupt('timeout');

  private interrupt(why: 'abort' | 'timeout'): void {
    if (this.state !== 'streaming' || this.reason) return;
    this.reason = why;
    this.controller?.abort(why === 'abort' ? this.signal?.reason : new Error('model call timed out'));
    if (this.waiting) this.settle(this.endAttempt(this.interruptEvent()));
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
    this.signal?.removeEventListener('abort', this.onAbort);
  }

  /** The attempt ended with `end`: finish, retry after a backoff, or fail. Resolves to the caller's next step. */
  private endAttempt(end: ModelStreamEvent): Promise<Step> {
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
      return this.next();
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
      return this.next();
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
    return (this.options.sleep ?? defaultSleep)(delayMs, this.signal).then(
      () => this.next(),
      () => {
        this.finish(errorEvent(abortedError()));
        return this.next();
      },
    );
  }

  private finish(terminal: ModelStreamEvent): void {
    this.state = 'finished';
    this.queue.push(terminal);
    this.endSpan(terminal);
  }

  private endSpan(terminal: ModelStreamEvent | undefined): void {
    if (this.spanEnded) return;
    this.spanEnded = true;
    endSpan(this.span, terminal, this.usage);
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
  let text = '';
  const toolCalls: ModelToolCall[] = [];
  let usage: ModelUsage = { inputTokens: 0, outputTokens: 0 };
  let stopReason: ModelStopReason = 'error';
  let error: ModelStreamError | undefined;
  for await (const event of streamModel(model, request, options)) {
    switch (event.type) {
      case 'text-delta':
        text += event.text;
        break;
      case 'tool-call':
        toolCalls.push(event.toolCall);
        break;
      case 'usage':
        usage = event.usage;
        break;
      case 'finish':
        stopReason = event.stopReason;
        break;
      case 'error':
        error = event.error;
        stopReason = event.error.code === ErrorCodes.aborted ? 'aborted' : 'error';
        break;
    }
  }
  return error ? { text, toolCalls, usage, stopReason, error } : { text, toolCalls, usage, stopReason };
}

function startSpan(tracer: Tracer, model: LanguageModel, request: ModelRequest): Span {
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
