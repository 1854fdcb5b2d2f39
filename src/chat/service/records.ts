import type { SessionRef } from '../../memory/index.js';
import type { SqlExecutor } from '../../store/index.js';
import { rememberNewest } from '../../util/index.js';
import type { ChatRunRecord } from '../chat-service.js';
import type { ChatContext } from './context.js';

export function remember(ctx: ChatContext, record: ChatRunRecord): void {
  rememberNewest(ctx.finished, record.runId, record, ctx.maxRememberedRuns);
}

export function settle(ctx: ChatContext, record: ChatRunRecord): void {
  ctx.live.delete(record.runId);
  remember(ctx, record);
  for (const resolve of ctx.waiters.get(record.runId) ?? []) resolve(record);
  ctx.waiters.delete(record.runId);
}

export function newRecord(
  ctx: ChatContext,
  runId: string,
  sessionKey: string,
  agentId: string,
): ChatRunRecord {
  return {
    runId,
    sessionKey,
    agentId,
    status: 'running',
    text: '',
    startedAt: ctx.clock.now(),
  };
}

/**
 * Session bookkeeping (message count, last activity) must not fail a turn whose transcript memory kept,
 * which it does even while the database cannot be written. With `tx`, in that transaction.
 */
export function touchSession(
  ctx: ChatContext,
  sessionId: string,
  messageDelta: number,
  tx?: SqlExecutor,
): Promise<unknown> {
  return ctx.options.sessions
    .touch(sessionId, { messageDelta, at: ctx.clock.now() }, tx)
    .catch((error: unknown) => {
      ctx.logger.warn({ err: error, sessionId }, 'could not update the session record');
    });
}

/**
 * The key's active instance. `confirmedByCommit`: the caller's first commit marks a run on it
 * (`inbox.markRunning`), which refuses an instance no longer active, so the store may skip its own check.
 */
export async function refFor(
  ctx: ChatContext,
  sessionKey: string,
  agentId: string,
  confirmedByCommit = false,
): Promise<SessionRef> {
  const sessionId = await ctx.options.sessions.activeId(
    sessionKey,
    agentId,
    confirmedByCommit ? { confirmedByCommit } : undefined,
  );
  return { sessionId, sessionKey, agentId };
}
