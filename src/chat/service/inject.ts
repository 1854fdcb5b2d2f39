import type { ChatContext } from './context.js';
import { refFor } from './records.js';

/** `ChatService.inject`'s input. */
export interface ChatInjectInput {
  sessionKey: string;
  agentId: string;
  role: 'assistant' | 'system';
  text: string;
  label?: string;
  /** A note sent again under its key is answered with the entry written the first time (see `injectNote`). */
  idempotencyKey?: string;
}

/**
 * Appends a note to the transcript without a run. A note sent again under its idempotency key (by a client
 * that missed the answer) is answered with the entry already written, for `endedRunsWindowMs`, also after a
 * restart (`readEndedRuns` reads the keys back from the entries' metadata), not appended twice.
 */
export async function injectNote(
  ctx: ChatContext,
  input: ChatInjectInput,
  text: string,
): Promise<{ memoryId: string }> {
  const { sessionKey, agentId, role, label, idempotencyKey } = input;
  if (idempotencyKey !== undefined) {
    const known = ctx.injectedKeys.get(idempotencyKey);
    if (known) return { memoryId: await known };
  }
  const appended = (async () => {
    const ref = await refFor(ctx, sessionKey, agentId);
    // Answered with its MemoryID as stored: committed with the session's count, or refused whole with
    // STORE_UNAVAILABLE, never kept in RAM for a later write that a restart would lose.
    const entry = await ctx.options.memory.append(
      ref,
      {
        role,
        content: text,
        metadata: {
          injected: true,
          ...(label ? { label } : {}),
          ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
        },
      },
      async (tx) => {
        await ctx.options.sessions.touch(ref.sessionId, { messageDelta: 1, at: ctx.clock.now() }, tx);
      },
      { requireCommit: true },
    );
    return entry.address;
  })();
  if (idempotencyKey !== undefined) {
    ctx.injectedKeys.set(idempotencyKey, appended, ctx.clock.now());
    // Refused, it was not written: the key may be sent again.
    appended.catch(() => {
      if (ctx.injectedKeys.get(idempotencyKey) === appended) ctx.injectedKeys.delete(idempotencyKey);
    });
  }
  return { memoryId: await appended };
}
