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
    let recordArchived = false;
    if (archive) {
      // The memory and the session record are archived in one commit, or neither is (STORE_UNAVAILABLE).
      await options.memory.archive(previous.id, reason, {
        requireCommit: true,
        also: async (tx) => {
          await options.sessions.archive(sessionKey, reason, tx);
          recordArchived = true;
        },
      });
      archived = true;
    }
    // Memory that was archived already (or never written) leaves the record to archive on its own.
    if (!recordArchived) await options.sessions.archive(sessionKey, reason);
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
  const result = await options.memory.summarize(ref, { reason: 'compact requested', requireCommit: true });
  const after = await options.memory.stats(ref);
  return {
    compacted: result.summarizedIds.length > 0,
    tokensBefore: before.activeTokens,
    tokensAfter: after.activeTokens,
    entriesBefore: before.activeEntries,
    entriesAfter: after.activeEntries,
  };
}
