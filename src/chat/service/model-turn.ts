import type { SessionRef } from '../../memory/index.js';
import type { ModelMessage } from '../../model/index.js';
import { SessionEndedError } from '../../store/index.js';
import type { AbortSource } from '../../util/index.js';
import type { ChatRunRecord } from '../chat-service.js';
import type { Acceptance } from './acceptance.js';
import type { ChatContext } from './context.js';
import { refFor, touchSession } from './records.js';

/**
 * A turn that calls the model: the user message joins the transcript (and leaves the inbox) in one
 * transaction, the context is pinned for the run, and the reply is written before the run is reported
 * finished.
 */
export async function runModelTurn(
  ctx: ChatContext,
  record: ChatRunRecord,
  resolvedRef: SessionRef,
  text: string,
  signal: AbortSource,
  acceptance?: Acceptance,
): Promise<void> {
  const { options, running, autoRecallBlocks } = ctx;
  const inbox = options.inbox;
  let ref = resolvedRef;
  const accept = () =>
    options.memory.append(
      ref,
      { role: 'user', content: text, metadata: { runId: record.runId } },
      // One transaction: the message is in the transcript and no longer pending, or neither. The session
      // record's count joins it too, which saves a commit per turn, in the statement that marks the run.
      async (tx) => {
        // Independent rows, issued together: on Postgres they share a round trip.
        const deleted = inbox && !acceptance ? inbox.delete(record.runId, tx) : undefined;
        const marked = inbox
          ? inbox.markRunning(
              {
                runId: record.runId,
                sessionId: ref.sessionId,
                sessionKey: ref.sessionKey,
                agentId: ref.agentId,
                startedAt: record.startedAt,
                activity: { messageDelta: 1, at: ctx.clock.now() },
              },
              tx,
            )
          : touchSession(ctx, ref.sessionId, 1, tx);
        // A message that waited in the inbox leaves it; one stored by its own turn was never in it.
        await (deleted ? Promise.all([deleted, marked]) : marked);
      },
      // A message acknowledged by this append must be on disk, not queued in RAM.
      { requireCommit: acceptance !== undefined },
    );
  let userEntry: Awaited<ReturnType<typeof accept>>;
  try {
    userEntry = await accept();
  } catch (error) {
    // Another connection ended the instance the key's id was kept for: nothing was stored, and the message
    // goes to the key's active instance, looked up again with the store's own check.
    if (!(error instanceof SessionEndedError) || error.sessionId !== ref.sessionId) throw error;
    ref = await refFor(ctx, ref.sessionKey, ref.agentId);
    userEntry = await accept();
  }
  running.add(record.runId);
  acceptance?.resolve();
  record.userMemoryId = userEntry.address;

  const lease = await options.memory.pin(ref);
  try {
    const system: string[] = [await options.identity.systemPrompt(ref.agentId)];
    if (ctx.autoRecall) {
      const recalled = await autoRecallBlocks.block(ref, text);
      if (recalled) system.push(recalled);
    }
    const messages: ModelMessage[] = lease.modelMessages();
    messages.unshift({ role: 'system', content: system.length === 1 ? system[0]! : system.join('\n\n') });

    const result = await options.runTurn({
      runId: record.runId,
      agentId: ref.agentId,
      sessionKey: ref.sessionKey,
      sessionId: ref.sessionId,
      workItemId: `session:${ref.sessionId}`,
      messages,
      signal,
      beforeFinish: async (outcome) => {
        // A failed turn keeps the user message and writes no half assistant entry; an aborted one keeps
        // what was said so far, marked as aborted.
        const transcript = outcome.status === 'error' ? [] : outcome.newMessages;
        const inputs = transcript.map((message) => {
          const metadata = {
            runId: record.runId,
            ...(outcome.status === 'aborted' ? { aborted: true } : {}),
          };
          if (message.role === 'assistant')
            return {
              role: 'assistant' as const,
              content: message.content,
              toolCalls: message.toolCalls,
              metadata,
            };
          if (message.role === 'tool') {
            return {
              role: 'tool' as const,
              content: message.content,
              toolCallId: message.toolCallId,
              toolName: message.toolName,
              isError: message.isError,
              metadata,
            };
          }
          return { role: message.role, content: message.content, metadata };
        });
        const kept = inputs.filter(
          (input) =>
            !(
              input.role === 'assistant' &&
              input.content === '' &&
              !('toolCalls' in input && input.toolCalls?.length)
            ),
        );
        // The run no longer needs its context pinned; releasing before the reply's append lets that append
        // evict what the turn pushed over the limits in its own commit.
        lease.release();
        if (kept.length === 0) return;
        // The reply, the session record and the end of the run in one transaction: with the reply durable
        // the run is over, so a crash after it is no interruption to report.
        const endsRun = inbox !== undefined && running.has(record.runId);
        const entries = await options.memory.appendBatch(ref, kept, async (tx) => {
          await (endsRun
            ? inbox.markEnded(
                {
                  runId: record.runId,
                  sessionKey: ref.sessionKey,
                  activity: { sessionId: ref.sessionId, messageDelta: kept.length, at: ctx.clock.now() },
                },
                tx,
              )
            : touchSession(ctx, ref.sessionId, kept.length, tx));
        });
        if (endsRun) running.delete(record.runId);
        const lastAssistant = [...entries].reverse().find((entry) => entry.role === 'assistant');
        if (lastAssistant) record.assistantMemoryId = lastAssistant.address;
      },
    });
    record.status = result.status;
    record.text = result.text;
    record.usage = { inputTokens: result.usage.inputTokens, outputTokens: result.usage.outputTokens };
    if (result.error) record.error = result.error;
  } finally {
    lease.release();
  }
}
