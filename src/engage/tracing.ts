import type { ModelToolCall } from '../model/index.js';
import {
  errorCodeOf,
  isTraced,
  markSpanFailed,
  runInSpan,
  type Span,
  SpanAttributes,
  startSpan,
  withSpan,
} from '../telemetry/index.js';
import {
  type ExecuteToolCallOptions,
  executeToolCall,
  executeToolCallTo,
  type ToolCallOutcome,
  type ToolOutcomeSink,
} from '../tools/index.js';
import type { EngageOptions, EngageResult } from './types.js';

/**
 * The spans of one run: `invoke_agent {agent}` for the run, one `engage_turn` per loop iteration (the model
 * call and that turn's tool calls are its children). A run in an untraced process gets a no-op span and
 * `turn`/`inTurn` call straight through: a turn then costs the loop only the closure it passes.
 */
export interface RunTrace {
  /** Ends the previous turn's span and runs `fn` as the first step of turn `turn`. */
  turn<T>(turn: number, fn: () => Promise<T>): Promise<T>;
  /** Runs `fn` inside the current turn's span. */
  inTurn<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * `executeToolCallTo`, as an `execute_tool` span when the run is traced. An untraced run's tool spans
   * would be no-ops too, so there it is the plain call, without the span's attributes and closures.
   */
  executeToolTo(
    call: ModelToolCall,
    options: ExecuteToolCallOptions,
    sink: ToolOutcomeSink,
    slot: number,
  ): void;
}

/** The trace of a run in an untraced process (and of steps driven without `runEngage`, in tests). */
export const untracedRun: RunTrace = {
  turn: (_turn, fn) => fn(),
  inTurn: (fn) => fn(),
  executeToolTo: executeToolCallTo,
};

/** Runs the loop `body` inside the run's `invoke_agent` span and records its outcome on it. */
export async function traceRun(
  options: EngageOptions,
  body: (trace: RunTrace) => Promise<EngageResult>,
): Promise<EngageResult> {
  const { agentId, runId, sessionKey } = options.scope;
  // Keys assigned one by one: a literal spreading the optional session keys takes V8's slow path every run.
  const attributes: Record<string, string> = {
    [SpanAttributes.operationName]: 'invoke_agent',
    [SpanAttributes.agentId]: agentId,
    [SpanAttributes.agentName]: agentId,
    [SpanAttributes.providerName]: options.model.provider,
    [SpanAttributes.requestModel]: options.model.modelId,
    [SpanAttributes.runId]: runId,
    [SpanAttributes.workItemId]: options.workItemId,
  };
  if (sessionKey !== undefined) {
    attributes[SpanAttributes.conversationId] = sessionKey;
    attributes[SpanAttributes.sessionKey] = sessionKey;
  }
  const span = startSpan(`invoke_agent ${agentId}`, { attributes });
  if (!isTraced(span)) return body(untracedRun);
  let turnSpan: Span | undefined;
  const endTurn = () => {
    turnSpan?.end();
    turnSpan = undefined;
  };
  const trace: RunTrace = {
    turn(turn, fn) {
      endTurn();
      const current = startSpan('engage_turn', {
        attributes: { [SpanAttributes.turn]: turn, [SpanAttributes.runId]: runId },
      });
      turnSpan = current;
      return runInSpan(current, fn);
    },
    inTurn(fn) {
      return turnSpan ? runInSpan(turnSpan, fn) : fn();
    },
    executeToolTo(call, options, sink, slot) {
      executeTracedToolCall(call, options).then(
        (outcome) => sink.onOutcome(outcome, slot),
        (error) => sink.onFailure(error, slot),
      );
    },
  };
  try {
    const result = await runInSpan(span, () => body(trace));
    endTurn();
    span.setAttribute(SpanAttributes.runStatus, result.status);
    span.setAttribute(SpanAttributes.runTurns, result.turns);
    span.setAttribute(SpanAttributes.inputTokens, result.usage.inputTokens);
    span.setAttribute(SpanAttributes.outputTokens, result.usage.outputTokens);
    if (result.status === 'error') markSpanFailed(span, result.error?.code ?? 'error');
    return result;
  } catch (error) {
    endTurn();
    markSpanFailed(span, errorCodeOf(error));
    throw error;
  } finally {
    span.end();
  }
}

/** `executeToolCall` as an `execute_tool {tool}` span, a child of the active turn (or of a code run). */
export function executeTracedToolCall(
  call: ModelToolCall,
  options: ExecuteToolCallOptions,
): Promise<ToolCallOutcome> {
  const attributes = {
    [SpanAttributes.operationName]: 'execute_tool',
    [SpanAttributes.toolName]: call.name,
    [SpanAttributes.toolCallId]: call.id,
    [SpanAttributes.toolType]: 'function',
  };
  return withSpan(`execute_tool ${call.name}`, { attributes }, async (span) => {
    const outcome = await executeToolCall(call, options);
    if (outcome.isError) markSpanFailed(span, outcome.status);
    return outcome;
  });
}
