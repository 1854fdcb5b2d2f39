import type { Bus } from '../bus/index.js';
import type { SqlDatabase } from '../store/index.js';
import { type Clock, type IdGenerator, type Logger, once } from '../util/index.js';
import type { WorkConfig } from './config.js';
import type { WorkErrorPayload } from './events.js';
import { createPostgresNotifier, type WorkNotifier } from './notifier.js';
import { handBackAll } from './sql/ahead.js';
import { block, setWaitingOn } from './sql/block.js';
import { cancel } from './sql/cancel.js';
import { claimBatch } from './sql/claim.js';
import { complete, completeMany, type WorkCompletion } from './sql/complete.js';
import { createQueueContext, forgetDeadlines, wake } from './sql/context.js';
import { publishTerminal } from './sql/events.js';
import { fail } from './sql/fail.js';
import { heartbeat, start } from './sql/lease.js';
import { pause } from './sql/pause.js';
import { type DeletedWorkItems, type DeleteEndedStep, deleteEnded } from './sql/prune.js';
import { counts, getMany, list, selectById } from './sql/read.js';
import { reapExpiredLeases } from './sql/reap.js';
import { release, requeueFrom } from './sql/requeue.js';
import { submit } from './sql/submit.js';
import { waitForWork } from './sql/wait.js';
import { isTerminalWorkState, type WorkState } from './states.js';
import type { ClaimFilter, SubmitResult, WorkItem, WorkListFilter, WorkSubmission } from './types.js';

export type { WorkCompletion } from './sql/complete.js';
export type { DeletedWorkItems, DeleteEndedStep, EndedLane } from './sql/prune.js';

export interface CreateWorkQueueOptions {
  db: SqlDatabase;
  bus?: Bus;
  clock?: Clock;
  idGenerator?: IdGenerator;
  logger?: Logger;
  /** Queue options; defaults from `workConfigSchema`. */
  config?: Partial<Omit<WorkConfig, 'awareness'>>;
  /**
   * Postgres only: a connection string for a dedicated LISTEN connection, so other processes' submissions
   * and completions wake this one at once. Without it, other processes are noticed at the poll interval.
   */
  listenConnectionString?: string;
  /** NOTIFY channel; processes sharing a database must agree on it. */
  notifyChannel?: string;
}

export interface WorkQueue {
  readonly config: Readonly<Omit<WorkConfig, 'awareness'>>;
  /** Creates an item (or merges it into a live one with the same kind and dedup key). */
  submit(submission: WorkSubmission): Promise<SubmitResult>;
  /** Takes the next ready item under a lease: highest priority first, then oldest. */
  claim(workerId: string, filter?: ClaimFilter): Promise<WorkItem | undefined>;
  /** Claims up to `limit` ready items in one statement. */
  claimBatch(workerId: string, limit: number, filter?: ClaimFilter): Promise<WorkItem[]>;
  /** claimed → running; refused with `LEASE_EXPIRED` when the caller no longer holds the lease. */
  start(id: string, workerId: string): Promise<WorkItem>;
  /** Extends the caller's lease; `LEASE_EXPIRED` when it has already lapsed or moved to another worker. */
  heartbeat(id: string, workerId: string, options?: { leaseMs?: number }): Promise<WorkItem>;
  /** Marks the item completed. Exactly once: a worker whose lease lapsed gets `LEASE_EXPIRED`. */
  complete(id: string, workerId: string, result?: WorkCompletion): Promise<WorkItem>;
  /**
   * Completes several of the caller's items in one statement, each under the same guard as `complete`.
   * One settled result per entry, in order: the completed item, or why that item was refused (an entry
   * repeating an earlier id is refused as already completed).
   */
  completeMany(
    workerId: string,
    completions: ReadonlyArray<WorkCompletion & { id: string }>,
  ): Promise<Array<PromiseSettledResult<WorkItem>>>;
  /**
   * Records a failed attempt. A retryable error with attempts left goes back to `queued` after an
   * exponential backoff; otherwise the item ends `failed` (not retryable) or `dead` (attempts used up).
   */
  fail(id: string, workerId: string, error: WorkErrorPayload): Promise<WorkItem>;
  /** Hands a claimed or running item back without spending an attempt (worker shutting down). */
  release(id: string, workerId: string): Promise<WorkItem>;
  /** Cancels the item and, unless `cascade: false`, its live descendants. */
  cancel(id: string, options?: { reason?: string; cascade?: boolean }): Promise<WorkItem>;
  pause(id: string, options?: { reason?: string }): Promise<WorkItem>;
  /** paused → queued (also how a speculative proposal is approved). */
  resume(id: string): Promise<WorkItem>;
  /** Explicitly blocks a queued item, or the caller's running item (releasing its lease). */
  block(id: string, options: { reason: string; workerId?: string; waitingOn?: string[] }): Promise<WorkItem>;
  /** blocked → queued. */
  unblock(id: string): Promise<WorkItem>;
  /** Records the children a running item awaits, so a restart resumes the wait (see docs/work.md). */
  setWaitingOn(id: string, workerId: string, childIds: string[] | null): Promise<WorkItem>;
  get(id: string): Promise<WorkItem | undefined>;
  getMany(ids: ReadonlyArray<string>): Promise<WorkItem[]>;
  list(filter?: WorkListFilter): Promise<WorkItem[]>;
  /** Number of items per state, optionally for one session, agent or kind. */
  counts(
    filter?: Pick<WorkListFilter, 'sessionKey' | 'agentId' | 'kind'>,
  ): Promise<Record<WorkState, number>>;
  /**
   * Re-queues (or, attempts used up, kills) items whose lease lapsed; moves items that were awaiting
   * children to `blocked`; re-queues blocked parents whose children have all ended. Returns what changed.
   */
  reapExpiredLeases(): Promise<{
    requeued: string[];
    dead: string[];
    blocked: string[];
    unblocked: string[];
  }>;
  /**
   * One step of pruning ended items (see `createWorkRetention`): deletes, among the oldest `maxRows` items
   * of the lane that ended before `before`, those no live item or kept family member needs.
   */
  deleteEnded(step: DeleteEndedStep): Promise<DeletedWorkItems>;
  /** Increases on every local or remote wake-up; pass it to `waitForWork` to avoid a lost wake-up. */
  readonly wakeSequence: number;
  /**
   * Resolves when work may be ready: a submission or re-queue here or in another process (LISTEN/NOTIFY),
   * the next backoff or lease deadline, or at the latest after `pollIntervalMs`. Never spins.
   */
  /**
   * `filter`: only items that this claim filter would take count as work that is due. `handOff`: the
   * waiting worker would start `slots` more items now; this process's submissions it would claim are then
   * inserted started under its lease and its next `claimBatch` takes them without a statement
   * (`handOffToIdle`; claims with `start: true`).
   */
  waitForWork(
    signal?: AbortSignal,
    options?: {
      sinceSequence?: number;
      filter?: ClaimFilter;
      handOff?: { workerId: string; slots: number };
    },
  ): Promise<void>;
  /** Resolves once cross-process wake-ups are active (at once when there is no LISTEN connection). */
  whenListening(): Promise<void>;
  /**
   * Hands back what was claimed ahead and stops the LISTEN connection. A second call returns the first's
   * promise: every caller's close resolves once that work is done.
   */
  close(): Promise<void>;
}

/**
 * Creates the durable work queue over a migrated database (migration 0004). Each operation is a step in
 * `sql/`, a function of one `QueueContext`; this function builds the context, starts the cross-process
 * wake-ups and binds the steps to it.
 */
export function createWorkQueue(options: CreateWorkQueueOptions): WorkQueue {
  const ctx = createQueueContext(options);
  const { state, logger } = ctx;
  const get = (id: string) => selectById(ctx, ctx.db, id);

  const notifier: WorkNotifier | undefined =
    ctx.isPostgres && options.listenConnectionString
      ? createPostgresNotifier({
          connectionString: options.listenConnectionString,
          channel: ctx.channel,
          instanceId: ctx.instanceId,
          logger,
          onWake: () => {
            forgetDeadlines(state);
            wake(state);
          },
          onTerminal: (id) => {
            void get(id).then(
              (item) => {
                if (item && isTerminalWorkState(item.state)) publishTerminal(ctx, item, true);
              },
              (error) =>
                logger.warn({ err: error, workItemId: id }, 'could not load a remotely finished work item'),
            );
          },
        })
      : undefined;
  if (notifier) state.hearsRemoteChanges = true;
  // Every close waits for the first: a caller that closes the database next must not do so under the
  // hand-back of what was claimed ahead, or the LISTEN connection, still open.
  const closing = once(async () => {
    state.closed = true;
    wake(state);
    try {
      await handBackAll(ctx);
    } catch (error) {
      logger.warn(
        { err: error },
        'could not hand back work claimed ahead; it is reclaimed when its lease lapses',
      );
    }
    await notifier?.close();
  });

  return {
    config: ctx.config,
    submit: (submission) => submit(ctx, submission),
    claim: async (workerId, filter) => (await claimBatch(ctx, workerId, 1, filter))[0],
    claimBatch: (workerId, limit, filter) => claimBatch(ctx, workerId, limit, filter),
    start: (id, workerId) => start(ctx, id, workerId),
    heartbeat: (id, workerId, heartbeatOptions) => heartbeat(ctx, id, workerId, heartbeatOptions),
    complete: (id, workerId, result) => complete(ctx, id, workerId, result),
    completeMany: (workerId, completions) => completeMany(ctx, workerId, completions),
    fail: (id, workerId, error) => fail(ctx, id, workerId, error),
    release: (id, workerId) => release(ctx, id, workerId),
    cancel: (id, cancelOptions) => cancel(ctx, id, cancelOptions),
    pause: (id, pauseOptions) => pause(ctx, id, pauseOptions),
    resume: (id) => requeueFrom(ctx, id, 'paused', 'work:resumed'),
    block: (id, blockOptions) => block(ctx, id, blockOptions),
    unblock: (id) => requeueFrom(ctx, id, 'blocked', 'work:unblocked'),
    setWaitingOn: (id, workerId, childIds) => setWaitingOn(ctx, id, workerId, childIds),
    get,
    getMany: (ids) => getMany(ctx, ids),
    list: (filter) => list(ctx, filter),
    counts: (filter) => counts(ctx, filter),
    reapExpiredLeases: () => reapExpiredLeases(ctx),
    deleteEnded: (step) => deleteEnded(ctx, step),
    get wakeSequence() {
      return state.wakeSequence;
    },
    waitForWork: (signal, waitOptions) => waitForWork(ctx, signal, waitOptions),
    whenListening: () => notifier?.whenListening() ?? Promise.resolve(),
    close: () => closing.run(),
  };
}
