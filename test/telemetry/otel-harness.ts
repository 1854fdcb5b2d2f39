import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterEach, beforeEach } from 'vitest';

export interface SpanNode {
  name: string;
  attributes: ReadableSpan['attributes'];
  status: ReadableSpan['status'];
  children: SpanNode[];
}

export interface TracingHarness {
  /** Finished spans, in the order they ended. */
  spans(): ReadableSpan[];
  /** The one finished span called `name`; throws when there is none or several. */
  span(name: string): ReadableSpan;
  /** Spans whose parent is `parent` (checked by span id and trace id), in start order. */
  childrenOf(parent: ReadableSpan): ReadableSpan[];
  /** The finished spans below `root` as a tree of names (children in start order). */
  tree(root: ReadableSpan): SpanNode;
}

/**
 * Registers a real tracer provider with an in-memory exporter and the async-hooks context manager (what
 * the Node SDK registers) before each test of the calling file, and removes them after it, so spans,
 * parents and context propagation are the SDK's own.
 */
export function useTracing(): TracingHarness {
  let exporter = new InMemorySpanExporter();
  let provider: BasicTracerProvider | undefined;
  beforeEach(() => {
    exporter = new InMemorySpanExporter();
    provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(provider);
  });
  afterEach(async () => {
    await provider?.shutdown();
    trace.disable();
    context.disable();
  });

  const spans = () => exporter.getFinishedSpans();
  const byStart = (left: ReadableSpan, right: ReadableSpan) =>
    left.startTime[0] - right.startTime[0] || left.startTime[1] - right.startTime[1];
  const childrenOf = (parent: ReadableSpan) =>
    spans()
      .filter(
        (span) =>
          span.parentSpanContext?.spanId === parent.spanContext().spanId &&
          span.spanContext().traceId === parent.spanContext().traceId,
      )
      .sort(byStart);
  const tree = (root: ReadableSpan): SpanNode => ({
    name: root.name,
    attributes: root.attributes,
    status: root.status,
    children: childrenOf(root).map(tree),
  });
  return {
    spans,
    span(name) {
      const found = spans().filter((span) => span.name === name);
      if (found.length !== 1) throw new Error(`expected one span "${name}", found ${found.length}`);
      return found[0]!;
    },
    childrenOf,
    tree,
  };
}

/** The tree with names only, for a readable `toEqual`. */
export function namesOf(node: SpanNode): unknown {
  return node.children.length ? { [node.name]: node.children.map(namesOf) } : node.name;
}
