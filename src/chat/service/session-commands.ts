import type { ChatService } from '../chat-service.js';
import type { ChatContext } from './context.js';
import { refFor } from './records.js';

/** `/new`, `/reset` and `chat.reset`: archives the active session (and its memory when asked), opens a new one. */
export async function resetSession(
  ctx: ChatContext,
  { sessionKey, agentId, reason, archive }: Parameters<ChatService['reset']>[0],
): ReturnType<ChatService['reset']> {
  const { options } = ctx;
  const previous = await options.sessions.getActive(sessionKey);
  let archived = false;
  if (previous) {
    if (archive) {
      await options.memory.archive(previous.id, reason);
      archived = true;
    }
    await options.sessions.archive(sessionKey, reason);
    ctx.autoRecallBlocks.forget(previous.id);
  }
  const next = await options.sessions.ensureActive(sessionKey, agentId);
  return { sessionId: next.id, ...(previous ? { previousSessionId: previous.id } : {}), archived };
}

/** `/compact` and `chat.compact`: summarizes the session's active context now. */
export async function compactSession(
  ctx: ChatContext,
  { sessionKey, agentId }: Parameters<ChatService['compact']>[0],
): ReturnType<ChatService['compact']> {
  const { options } = ctx;
  const ref = await refFor(ctx, sessionKey, agentId);
  const before = await options.memory.stats(ref);
  const result = await options.memory.summarize(ref, { reason: 'compact requested' });
  const after = await options.memory.stats(ref);
  return {
    compacted: result.summarizedIds.length > 0,
    tokensBefore: before.activeTokens,
    tokensAfter: after.activeTokens,
    entriesBefore: before.activeEntries,
    entriesAfter: after.activeEntries,
  };
}
