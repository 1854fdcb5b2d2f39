import { activeContext } from '../../telemetry/index.js';
import {
  ErrorCodes,
  errorForClient,
  isStoreUnavailable,
  LazyAbortController,
  retrying,
  UserInputError,
} from '../../util/index.js';
import type { ChatRunRecord, ChatService } from '../chat-service.js';
import { traceChatRun } from '../tracing.js';
import type { Acceptance } from './acceptance.js';
import { builtInCommand } from './commands.js';
import type { ChatContext } from './context.js';
import { runLocalReply } from './local-reply.js';
import { runModelTurn } from './model-turn.js';
import type { QueueSlot } from './queue.js';
import { newRecord, refFor, settle } from './records.js';
import { markEnded } from './recovery.js';

/** The longest wait between a queued turn's attempts while the store is unavailable. */
const maxStoreRetryDelayMs = 5_000;

/** Aborts the session's live runs (or the one run asked for); the runs settle as aborted on their own. */
export async function abortRuns(
  ctx: ChatContext,
  { sessionKey, runId }: Parameters<ChatService['abort']>[0],
): ReturnType<ChatService['abort']> {
  const { live } = ctx;
  const runIds: string[] = [];
  for (const run of live.values()) {
    if (run.record.sessionKey !== sessionKey) continue;
    if (runId !== undefined && run.record.runId !== runId) continue;
    run.controller.abort(new UserInputError({ code: ErrorCodes.aborted, message: 'aborted by the user' }));
    runIds.push(run.record.runId);
  }
  return { aborted: runIds.length > 0, runIds };
}

/**
 * Queues one turn in the session's lane. `message` is already normalized. Without `acceptance` the message
 * is in the inbox already; with it, the turn stores the message itself (see `Acceptance`). `slot`, the
 * turn's place in the queue (`ctx.queue`), is given back when the turn starts.
 */
export function startTurn(
  ctx: ChatContext,
  {
    runId,
    sessionKey,
    agentId,
    text: message,
  }: {
    runId: string;
    sessionKey: string;
    agentId: string;
    text: string;
  },
  acceptance?: Acceptance,
  slot?: QueueSlot,
): void {
  const { options, logger, clock, lanes, live, running, unsettledTurns } = ctx;
  const trimmed = message.trim();
  const record = newRecord(ctx, runId, sessionKey, agentId);
  // The turn runs later, in the session's lane: its span's parent is what accepted the message.
  const traceParent = activeContext();
  // Lazy: a turn that nothing aborts and whose run asks for no signal makes none (util/lazy-abort.ts).
  const controller = new LazyAbortController();
  unsettledTurns.set(sessionKey, (unsettledTurns.get(sessionKey) ?? 0) + 1);
  const done = lanes.run(sessionKey, async () => {
    slot?.release();
    options.onTurnActivity?.(agentId, true);
    let unstored: unknown;
    // A command may act before it fails; a second attempt must not run it again.
    let commandStarted = false;
    const attempt = async () => {
      // A message stored by its own turn (`acceptance`) is committed with its run's mark, which checks the
      // id (runModelTurn), and is never queued in RAM, so a refusal always reaches this turn.
      const ref = await refFor(ctx, sessionKey, agentId, acceptance !== undefined);
      const command = /^\/([a-z][a-z0-9_-]*)(?:\s+([\s\S]*))?$/i.exec(trimmed);
      const handler = command
        ? builtInCommand(
            ctx,
            command[1]!.toLowerCase(),
            command[2]?.trim() ?? '',
            record,
            ref,
            controller.signal,
          )
        : undefined;
      if (handler) {
        commandStarted = true;
        // A command is not replayed after a crash: it may have acted already.
        await options.inbox?.delete(runId);
        await runLocalReply(ctx, record, ref, handler);
      } else
        await traceChatRun(record, ref.sessionId, traceParent, () =>
          runModelTurn(ctx, record, ref, message, controller, acceptance),
        );
    };
    /**
     * A turn that ends without running the model (it failed, or was stopped before it began): the message,
     * unless its run is marked running, leaves the inbox so it does not come back as a reply after the next
     * start, and its clients get the final.
     */
    const endUnrun = async (status: 'error' | 'aborted', error: NonNullable<ChatRunRecord['error']>) => {
      if (!running.has(runId))
        await options.inbox?.delete(runId).catch((cleanup: unknown) => {
          logger.warn({ err: cleanup, runId }, 'could not drop an unanswered message from the inbox');
        });
      options.bus.publish(
        'run:finished',
        { runId, status, text: '', error, usage: { inputTokens: 0, outputTokens: 0 }, turns: 0 },
        { runId, sessionKey, agentId },
      );
    };
    const endAborted = async () => {
      record.status = 'aborted';
      // Not stored yet: the send is refused instead (below).
      if (!acceptance)
        await endUnrun('aborted', {
          code: ErrorCodes.aborted,
          message: 'The run was aborted.',
          retryable: false,
        });
    };
    try {
      if (controller.aborted) {
        await endAborted();
        return record;
      }
      // A message waiting in the inbox is acknowledged and on disk: while the store cannot be reached
      // (a connection dropped, a failover), its turn waits and tries again instead of failing it. A message
      // stored by its own turn is not acknowledged yet; its sender hears of the failure and may resend.
      try {
        await retrying(attempt, {
          firstDelayMs: ctx.storeRetryMs,
          maxDelayMs: maxStoreRetryDelayMs,
          forMs: ctx.storeRetryForMs,
          retryable: (error) =>
            !acceptance &&
            !commandStarted &&
            // Once the message is in the transcript a second attempt would store it twice.
            record.userMemoryId === undefined &&
            isStoreUnavailable(error),
          onRetry: (error, delayMs) =>
            logger.warn(
              { err: error, runId, sessionKey, retryInMs: delayMs },
              'the store is unavailable; the queued message stays in the inbox and its turn is tried again',
            ),
          signal: controller,
          clock,
        });
      } catch (error) {
        // Stopped while it waited to try again.
        if (!controller.aborted || error !== controller.reason) throw error;
        await endAborted();
        return record;
      }
    } catch (error) {
      if (acceptance && !acceptance.settled) {
        unstored = error;
        return record;
      }
      logger.error({ err: error, runId: record.runId, sessionKey }, 'chat turn failed');
      record.status = 'error';
      record.error = errorForClient(error, 'the turn failed inside agentd; see the server log');
      await endUnrun('error', record.error);
    } finally {
      options.onTurnActivity?.(agentId, false);
      const left = (unsettledTurns.get(sessionKey) ?? 1) - 1;
      if (left > 0) unsettledTurns.set(sessionKey, left);
      else unsettledTurns.delete(sessionKey);
      if (acceptance && !acceptance.settled) {
        acceptance.reject(
          unstored ??
            new UserInputError({
              code: ErrorCodes.aborted,
              message: 'the message was aborted before it was stored',
            }),
        );
        live.delete(runId);
      } else {
        record.endedAt = clock.now();
        if (running.delete(runId)) await markEnded(ctx, record);
        settle(ctx, record);
      }
    }
    return record;
  });
  live.set(runId, { record, controller, done });
}
