import {
  type Context,
  markSpanFailed,
  type RecallOutcome,
  SpanAttributes,
  withSpan,
} from '../telemetry/index.js';
import type { ChatRunRecord } from './chat-service.js';

/**
 * A chat run as the `chat_run` span: the user message stored, memory recalled, the engage run
 * (`invoke_agent {agent}`) and the transcript persisted are its children. `parent` is the context of the
 * `send` that accepted the message: the turn itself runs later, in the session's lane.
 */
export function traceChatRun<T>(
  record: ChatRunRecord,
  sessionId: string,
  parent: Context,
  run: () => Promise<T>,
): Promise<T> {
  return withSpan(
    'chat_run',
    {
      parent,
      attributes: {
        [SpanAttributes.runId]: record.runId,
        [SpanAttributes.agentId]: record.agentId,
        [SpanAttributes.sessionKey]: record.sessionKey,
        [SpanAttributes.conversationId]: sessionId,
      },
    },
    async (span) => {
      const value = await run();
      span.setAttribute(SpanAttributes.runStatus, record.status);
      if (record.status === 'error') markSpanFailed(span, record.error?.code ?? 'error');
      return value;
    },
  );
}

/** Automatic recall as the `memory_recall` span, its outcome reported to `onRecall` (the SLO metric). */
export function traceRecall(
  onRecall: ((outcome: RecallOutcome) => void) | undefined,
  recall: () => Promise<string>,
): Promise<string> {
  return withSpan('memory_recall', {}, async (span) => {
    try {
      const text = await recall();
      const outcome = text ? 'hit' : 'empty';
      span.setAttribute(SpanAttributes.recallOutcome, outcome);
      onRecall?.(outcome);
      return text;
    } catch (error) {
      onRecall?.('error');
      throw error;
    }
  });
}
