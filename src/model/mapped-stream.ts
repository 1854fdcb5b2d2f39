import type { ModelStreamEvent } from './spec.js';

/** How a provider turns its SDK's stream into normalized events. */
export interface UpstreamMapper<T> {
  /** Starts the request; called on the first `next()`. May reject (HTTP errors): `onError` handles it. */
  open(): Promise<AsyncIterable<T>>;
  /** One upstream item; emit zero or more events. */
  onItem(item: T, emit: (event: ModelStreamEvent) => void): void;
  /** The upstream ended; emit the closing events, ending with `finish` or `error`. */
  onEnd(emit: (event: ModelStreamEvent) => void): void;
  /** The upstream failed; the final `error` event. */
  onError(error: unknown): ModelStreamEvent;
}

/**
 * A provider stream as a thin mapper over the SDK's iterator, instead of an async generator: per chunk it
 * adds one promise reaction, which keeps the provider's share of a streamed chunk small.
 */
export function mapUpstream<T>(mapper: UpstreamMapper<T>): AsyncIterableIterator<ModelStreamEvent> {
  return new MappedStream(mapper);
}

class MappedStream<T> implements AsyncIterableIterator<ModelStreamEvent> {
  private readonly pending: ModelStreamEvent[] = [];
  private upstream: AsyncIterator<T> | undefined;
  private ended = false;

  constructor(private readonly mapper: UpstreamMapper<T>) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<ModelStreamEvent>> {
    const ready = this.take();
    if (ready) return Promise.resolve(ready);
    if (this.upstream) return this.upstream.next().then(this.onResult, this.onFailure);
    return this.mapper.open().then((iterable) => {
      this.upstream = iterable[Symbol.asyncIterator]();
      return this.next();
    }, this.onFailure);
  }

  return(): Promise<IteratorResult<ModelStreamEvent>> {
    this.ended = true;
    this.pending.length = 0;
    this.upstream?.return?.().catch(() => {});
    return Promise.resolve({ value: undefined, done: true });
  }

  private readonly emit = (event: ModelStreamEvent): void => {
    this.pending.push(event);
  };

  private take(): IteratorResult<ModelStreamEvent> | undefined {
    if (this.pending.length > 0) return { value: this.pending.shift()!, done: false };
    if (this.ended) return { value: undefined, done: true };
    return undefined;
  }

  private readonly onResult = (
    result: IteratorResult<T>,
  ): IteratorResult<ModelStreamEvent> | Promise<IteratorResult<ModelStreamEvent>> => {
    if (this.ended) return { value: undefined, done: true };
    if (result.done) {
      this.ended = true;
      this.mapper.onEnd(this.emit);
    } else {
      this.mapper.onItem(result.value, this.emit);
    }
    return this.take() ?? this.next();
  };

  private readonly onFailure = (error: unknown): IteratorResult<ModelStreamEvent> => {
    if (this.ended) return { value: undefined, done: true };
    this.ended = true;
    this.pending.push(this.mapper.onError(error));
    return this.take()!;
  };
}
