import { ErrorCodes, ownerMayBeAlive } from '../../util/index.js';
import type { ChatRunRecord, RunningRun } from '../chat-service.js';
import type { ChatContext } from './context.js';
import { newRecord, refFor, remember } from './records.js';

/**
 * Ends a run whose reply's transaction did not (it wrote no reply), keeping how it ended for a restart to read
 * (`readEndedRuns`). In the session's write order, after the transcript the turn wrote (queued with it while
 * degraded).
 */
export async function markEnded(ctx: ChatContext, record: ChatRunRecord): Promise<void> {
  const inbox = ctx.options.inbox;
  if (!inbox) return;
  try {
    const ref = await refFor(ctx, record.sessionKey, record.agentId);
    const { runId, sessionKey, status, error } = record;
    await ctx.options.memory.persist(ref, (tx) =>
      status === 'running'
        ? inbox.markEnded({ runId, sessionKey }, tx)
        : inbox.markEndedWithoutReply(
            {
              runId,
              sessionKey,
              status,
              ...(error ? { error } : {}),
              endedAt: record.endedAt ?? ctx.clock.now(),
            },
            tx,
          ),
    );
  } catch (error) {
    // The run is over for every client already; at worst the next start reports it interrupted.
    ctx.logger.warn({ err: error, runId: record.runId }, 'could not record the end of a chat run');
  }
}

/** Whether the process that marked a run (or accepted a message) may be alive, and so running it itself. */
export type OwnerLives = (item: { owner?: string }) => boolean;

/**
 * The owners alive now: one of this host by its process (`ownerMayBeAlive`), one of another host by its
 * lease (`ChatInbox.leasedOwners`), which cannot be seen otherwise; without leases another host's counts as
 * gone, as waiting for a host that may never start again (a container made anew gets a new host name) could
 * leave acknowledged messages unanswered for good. Read once for a pass over the runs and the inbox.
 */
export async function ownersAlive(ctx: ChatContext): Promise<OwnerLives> {
  const leased = (await ctx.options.inbox?.leasedOwners?.()) ?? new Set<string>();
  return (item) =>
    item.owner !== undefined && ownerMayBeAlive(item.owner, { otherHostsAlive: leased.has(item.owner) });
}

const interruptedError = {
  code: ErrorCodes.runInterrupted,
  message: 'agentd stopped before this reply was finished; send the message again to retry',
  retryable: true,
};

/**
 * Runs marked running at start were cut off by a crash: their clients get an error final (and the
 * transcript a note) instead of silence. They are not run again: their tools may have acted already. Runs
 * an owner that may be alive marked (another process on the same database, `ownerMayBeAlive`) are its own,
 * left to it.
 */
export async function failInterrupted(
  ctx: ChatContext,
  lives: OwnerLives,
  marked?: RunningRun[],
): Promise<string[]> {
  const { options, live, finished, clock, logger } = ctx;
  const inbox = options.inbox;
  if (!inbox) return [];
  // Another process sharing the database may be running its own: only a gone owner's runs were cut off.
  const interrupted = (marked ?? (await inbox.listRunning()))
    .filter((run) => !lives(run))
    .sort((a, b) => a.startedAt - b.startedAt);
  for (const run of interrupted) {
    if (live.has(run.runId) || finished.has(run.runId)) continue;
    const record = newRecord(ctx, run.runId, run.sessionKey, run.agentId);
    record.startedAt = run.startedAt;
    record.status = 'error';
    record.error = { ...interruptedError };
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

/** Entries read back per run at most: a user message and its reply, with room for tool rounds between. */
const entriesPerEndedRun = 4;

/**
 * The runs that ended before this start, read back from the transcript (every entry of a run carries its
 * run id, which is the idempotency key it was sent under): a client that sends a message again under its key
 * after a restart, having missed the answer, is told how the run ended instead of having it answered twice.
 * Runs whose entries are older than `endedRunsWindowMs` are not read. A run's newest assistant entry is its
 * reply; a run with none failed (a failed turn writes no reply) or answered nothing, which the transcript
 * cannot tell apart, so it is reported as RUN_OUTCOME_UNKNOWN. The idempotency keys of the notes injected
 * in the window are read back the same way (`injectNote`).
 */
export async function readEndedRuns(
  ctx: ChatContext,
  runningElsewhere: ReadonlySet<string> = new Set(),
): Promise<number> {
  const { options, clock, live, finished } = ctx;
  const marks = await options.memory.recentMessageMarks({
    sinceMs: clock.now() - ctx.endedRunsWindowMs,
    maxEntries: ctx.maxEndedRunsRead * entriesPerEndedRun,
  });
  const read = new Map<string, ChatRunRecord>();
  const injected: Array<[key: string, address: string, atMs: number]> = [];
  // The last written first.
  for (const mark of marks) {
    const injectedKey = mark.metadata?.injected === true ? mark.metadata.idempotencyKey : undefined;
    if (typeof injectedKey === 'string') injected.push([injectedKey, mark.address, mark.createdAtMs]);
    const runId = mark.metadata?.runId;
    if (
      mark.role === 'system' ||
      typeof runId !== 'string' ||
      live.has(runId) ||
      finished.has(runId) ||
      runningElsewhere.has(runId)
    )
      continue;
    let record = read.get(runId);
    if (!record) {
      if (read.size >= ctx.maxEndedRunsRead) break;
      record = newRecord(ctx, runId, mark.sessionKey, mark.agentId);
      record.status = 'error';
      record.error = {
        code: ErrorCodes.runOutcomeUnknown,
        message: 'this run ended before agentd restarted and stored no reply: it failed, or answered nothing',
        retryable: true,
      };
      record.startedAt = mark.createdAtMs;
      record.endedAt = mark.createdAtMs;
      read.set(runId, record);
    }
    if (mark.role === 'user') {
      record.userMemoryId = mark.address;
      record.startedAt = mark.createdAtMs;
    } else if (record.assistantMemoryId === undefined) {
      record.assistantMemoryId = mark.address;
      record.endedAt = mark.createdAtMs;
      if (mark.metadata?.interrupted === true) record.error = { ...interruptedError };
      else {
        record.status = mark.metadata?.aborted === true ? 'aborted' : 'completed';
        delete record.error;
      }
    }
  }
  // A run with no reply in the transcript failed, answered nothing or was stopped first: its session's row
  // says which, for the last such run of each row.
  if (options.inbox && [...read.values()].some(unreplied)) {
    for (const run of await options.inbox.listUnreplied()) {
      const record = read.get(run.runId);
      if (!record || !unreplied(record) || record.sessionKey !== run.sessionKey) continue;
      record.status = run.status as ChatRunRecord['status'];
      record.endedAt = run.endedAt;
      if (run.error) record.error = { ...run.error };
      else delete record.error;
    }
  }
  for (const [runId, record] of read)
    ctx.endedBeforeStart.set(runId, record, record.endedAt ?? record.startedAt);
  // The oldest first, so the newest are kept when there are more than the bound.
  for (const [key, address, atMs] of injected.reverse())
    if (!ctx.injectedKeys.has(key)) ctx.injectedKeys.set(key, Promise.resolve(address), atMs);
  return read.size;
}

/** A run read back from its marks alone, with no reply: how it ended is not in the transcript. */
const unreplied = (record: ChatRunRecord) =>
  record.assistantMemoryId === undefined && record.error?.code === ErrorCodes.runOutcomeUnknown;

/** A run read back by `readEndedRuns` with its reply's text, read from the transcript at its first wait. */
export async function withReplyText(ctx: ChatContext, record: ChatRunRecord): Promise<ChatRunRecord> {
  if (record.text === '' && record.assistantMemoryId !== undefined && record.status !== 'error')
    record.text = (await ctx.options.memory.get(record.assistantMemoryId))?.content ?? '';
  return record;
}
