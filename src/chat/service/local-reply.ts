import type { SessionRef } from '../../memory/index.js';
import { errorForClient, UserInputError } from '../../util/index.js';
import type { ChatRunRecord } from '../chat-service.js';
import type { ChatContext } from './context.js';
import { touchSession } from './records.js';

/** Runs a turn that does not call the model (slash commands): same events, same persistence. */
export async function runLocalReply(
  ctx: ChatContext,
  record: ChatRunRecord,
  ref: SessionRef,
  reply: () => Promise<string>,
  metadata: Record<string, unknown> = { command: true },
): Promise<void> {
  const { options } = ctx;
  const scope = { runId: record.runId, sessionKey: record.sessionKey, agentId: record.agentId };
  options.bus.publish(
    'run:started',
    {
      runId: record.runId,
      sessionKey: record.sessionKey,
      agentId: record.agentId,
      model: 'agentd/command',
    },
    scope,
  );
  let text: string;
  try {
    text = await reply();
  } catch (error) {
    const failure = errorForClient(error, 'the command failed inside agentd; see the server log');
    if (!UserInputError.isInstance(error))
      ctx.logger.error({ err: error, runId: record.runId, sessionKey: record.sessionKey }, 'command failed');
    record.status = 'error';
    record.error = failure;
    options.bus.publish(
      'run:finished',
      {
        runId: record.runId,
        status: 'error',
        text: '',
        error: failure,
        usage: { inputTokens: 0, outputTokens: 0 },
        turns: 0,
      },
      scope,
    );
    return;
  }
  const entry = await options.memory.append(ref, {
    role: 'assistant',
    content: text,
    metadata: { runId: record.runId, ...metadata },
  });
  await touchSession(ctx, ref.sessionId, 1);
  record.assistantMemoryId = entry.address;
  record.text = text;
  record.status = 'completed';
  options.bus.publish('run:text-delta', { runId: record.runId, delta: text, text }, scope);
  options.bus.publish(
    'run:finished',
    {
      runId: record.runId,
      status: 'completed',
      text,
      usage: { inputTokens: 0, outputTokens: 0 },
      turns: 0,
    },
    scope,
  );
}
