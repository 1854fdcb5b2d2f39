import type { Attributes, Context, Span } from '@opentelemetry/api';
import { noopSpan, registeredOtelApi, rootContext, SpanKind, SpanStatusCode } from '../util/index.js';

/**
 * Span helpers shared by every subsystem that traces its work. They go through the global OpenTelemetry API:
 * until an SDK registers a tracer provider (see `startTelemetry`) every span is a non-recording no-op, and
 * `runInSpan` then skips the context switch entirely, so an untraced process pays nothing per span. Until
 * anything registers with the API at all, it is not even loaded (`registeredOtelApi`).
 *
 * Span names and `gen_ai.*` attributes follow the OpenTelemetry GenAI semantic conventions where they
 * define the operation (`invoke_agent {agent}`, `chat {model}`, `execute_tool {tool}`); agentd's own
 * operations (`chat_run`, `engage_turn`, `code_run`, `work_item`, `workflow_run`, …) carry `agentd.*`
 * attributes. Span contents never include prompts, tool arguments, results or error messages: those can
 * hold secrets and user data. Errors are described by their stable code in `error.type`.
 */
export const tracerName = 'agentd';

/** The attribute keys in use, so producers and tests agree on the spelling. */
export const SpanAttributes = {
  operationName: 'gen_ai.operation.name',
  providerName: 'gen_ai.provider.name',
  agentId: 'gen_ai.agent.id',
  agentName: 'gen_ai.agent.name',
  conversationId: 'gen_ai.conversation.id',
  requestModel: 'gen_ai.request.model',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  toolType: 'gen_ai.tool.type',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  errorType: 'error.type',
  runId: 'agentd.run.id',
  runStatus: 'agentd.run.status',
  runTurns: 'agentd.run.turns',
  sessionKey: 'agentd.session.key',
  turn: 'agentd.turn',
  workItemId: 'agentd.work_item.id',
  workItemKind: 'agentd.work_item.kind',
  workItemParentId: 'agentd.work_item.parent_id',
  workItemAttempt: 'agentd.work_item.attempt',
  workItemOutcome: 'agentd.work_item.outcome',
  recallOutcome: 'agentd.recall.outcome',
  workerType: 'agentd.worker.type',
  codeLanguage: 'agentd.code.language',
  executionId: 'agentd.code.execution_id',
  workflowId: 'agentd.workflow.id',
  workflowTaskId: 'agentd.workflow.task_id',
  workflowNodeId: 'agentd.workflow.node_id',
  workflowNodeRole: 'agentd.workflow.node_role',
  workflowStatus: 'agentd.workflow.status',
} as const;

export interface StartSpanOptions {
  attributes?: Attributes;
  kind?: SpanKind;
  /** The parent's context; defaults to the active one. Pass it when the work runs later (queues, lanes). */
  parent?: Context;
  /** Starts a new trace, for work that is not caused by what happens to be active (timers, claimed items). */
  root?: boolean;
}

/** The tracer is looked up per span: a tracer provider registered after startup (or by a test) takes effect. */
export function startSpan(name: string, options: StartSpanOptions = {}): Span {
  const api = registeredOtelApi();
  if (api === undefined) return noopSpan;
  return api.trace.getTracer(tracerName).startSpan(
    name,
    {
      kind: options.kind ?? SpanKind.INTERNAL,
      ...(options.attributes ? { attributes: options.attributes } : {}),
      ...(options.root ? { root: true } : {}),
    },
    options.parent ?? api.context.active(),
  );
}

/** False for the no-op spans of an untraced process: nothing below them needs a context of their own. */
export function isTraced(span: Span): boolean {
  if (span === noopSpan) return false;
  // A span not of this module's no-op comes from a registered API.
  return span.isRecording() || registeredOtelApi()!.trace.isSpanContextValid(span.spanContext());
}

/** The active context, to be passed as `parent` to work that starts later (a queue, a session lane). */
export function activeContext(): Context {
  return registeredOtelApi()?.context.active() ?? rootContext;
}

/** Runs `fn` with `span` as the active span, so spans started inside (also across awaits) are its children. */
export function runInSpan<T>(span: Span, fn: () => T, parent: Context = activeContext()): T {
  if (!isTraced(span)) return fn();
  const { context, trace } = registeredOtelApi()!;
  return context.with(trace.setSpan(parent, span), fn);
}

/** Marks the span failed with a stable code; the message stays out (it can carry user data). */
export function markSpanFailed(span: Span, code: string): void {
  span.setAttribute(SpanAttributes.errorType, code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: code });
}

/** The stable code of a thrown value: an agentd error's `code`, else the error's class name. */
export function errorCodeOf(error: unknown): string {
  if (typeof error === 'object' && error !== null) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') return code;
    if (error instanceof Error) return error.name;
  }
  return 'Error';
}

/**
 * Runs `fn` inside a new span that ends when `fn` settles; a throw marks the span failed (with the thrown
 * value's code) and is rethrown.
 */
export async function withSpan<T>(
  name: string,
  options: StartSpanOptions,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = options.parent ?? activeContext();
  const span = startSpan(name, options);
  // A no-op span has nothing to mark or end: the untraced path is the plain call.
  if (!isTraced(span)) return fn(span);
  const { context, trace } = registeredOtelApi()!;
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (error) {
    markSpanFailed(span, errorCodeOf(error));
    throw error;
  } finally {
    span.end();
  }
}

export type { Context, Span };
