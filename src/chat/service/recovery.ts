import { ErrorCodes } from '../../util/index.js';
import type { ChatRunRecord } from '../chat-service.js';
import type { ChatContext } from './context.js';
import { newRecord, refFor, remember } from './records.js';

/** In the session's write order, after the transcript the turn wrote (queued with it while degraded). */
export async function markEnded(ctx: ChatContext, record: ChatRunRecord): Promise<void> {
  const inbox = ctx.options.inbox;
  if (!inbox) return;
  try {
    const ref = await refFor(ctx, record.sessionKey, record.agentId);
    await ctx.options.memory.persist(ref, (tx) =>
      inbox.markEnded({ runId: record.runId, sessionKey: record.sessionKey }, tx),
    );
  } catch (error) {
    // The run is over for every client already; at worst the next start reports it interrupted.
    ctx.logger.warn({ err: error, runId: record.runId }, 'could not record the end of a chat run');
  }
}

/**
 * Runs marked running at start were cut off by a crash: their clients get an error final (and the
 * transcript a note) instead of silence. They are not run again: their tools may have acted already.
 */
export async function failInterrupted(ctx: ChatContext): Promise<string[]> {
  const { options, live, finished, clock, logger } = ctx;
  const inbox = options.inbox;
  if (!inbox) return [];
  const interrupted = (await inbox.listRunning()).sort((a, b) => a.startedAt - b.startedAt);
  for (const run of interrupted) {
    if (live.has(run.runId) || finished.has(run.runId)) continue;
    const record = newRecord(ctx, run.runId, run.sessionKey, run.agentId);
    record.startedAt = run.startedAt;
    record.status = 'error';
    record.error = {
      code: ErrorCodes.runInterrupted,
      message: 'agentd stopped before this reply was finished; send the message again to retry',
      retryable: true,
    };
    const ref = await refFor(ctx, run.sessionKey, run.agentId);
    const note = await options.memory.append(
      ref,
      {
        role: 'assistant',
        content:
          '(No reply: agentd stopped before this reply was finished. Send the message again to retry.)',
        metadata: { runId: run.runId, interrupted: true },
      },
      (tx) => inbox.markEnded({ runId: run.runId, sessionKey: run.sessionKey }, tx),
    );
    record.assistantMemoryId = note.address;
    record.endedAt = clock.now();
    logger.warn({ runId: run.runId, sessionKey: run.sessionKey }, 'a chat run was interrupted by a restart');
    options.bus.publish(
      'run:finished',
      {
        runId: run.runId,
        status: 'error',
        text: '',
        error: record.error,
        usage: { inputTokens: 0, outputTokens: 0 },
        turns: 0,
      },
      { runId: run.runId, sessionKey: run.sessionKey, agentId: run.agentId },
    );
    remember(ctx, record);
  }
  return interrupted.map((run) => run.runId);
}
