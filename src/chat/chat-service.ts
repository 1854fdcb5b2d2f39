import type { Bus, RunStatus } from '../bus/index.js';
import type { EngageResult } from '../engage/index.js';
import type { IdentityLoader } from '../identity/index.js';
import type { MemoryService } from '../memory/index.js';
import type { ModelMessage } from '../model/index.js';
import type { SessionActivity, SessionStore, SqlExecutor, UnrepliedRun } from '../store/index.js';
import type { RecallOutcome } from '../telemetry/index.js';
import type { IdGenerator } from '../util/index.js';
import {
  type AbortSource,
  type Clock,
  createKeyedMutex,
  createRecentMap,
  ErrorCodes,
  LazyAbortController,
  type Logger,
  maxTimerMs,
  StringDictionary,
  silentLogger,
  systemClock,
  UserInputError,
} from '../util/index.js';
import { createAutoRecall } from './auto-recall.js';
import { createAcceptance } from './service/acceptance.js';
import { InboxBacklog } from './service/backlog.js';
import type { ChatContext } from './service/context.js';
import { type ChatInjectInput, injectNote } from './service/inject.js';
import { runLocalReply } from './service/local-reply.js';
import { defaultMaxQueuedTurns, defaultMaxQueuedTurnsPerSession, TurnQueue } from './service/queue.js';
import { newRecord, refFor, settle } from './service/records.js';
import {
  failInterrupted,
  type OwnerLives,
  ownersAlive,
  readEndedRuns,
  withReplyText,
} from './service/recovery.js';
import { compactSession, resetSession } from './service/session-commands.js';
import { abortRuns, startTurn } from './service/turn.js';
import { traceRecall } from './tracing.js';

/** What `runTurn` gets: everything the engage loop needs for one chat run, prepared by the chat service. */
export interface ChatTurnInput {
  runId: string;
  agentId: string;
  sessionKey: string;
  sessionId: string;
  /** The implicit work item that owns the session's ledger. */
  workItemId: string;
  /** System prompt (identity + recalled memory), then the active context ending with the new user message. */
  messages: ModelMessage[];
  /** A lazy controller: its AbortSignal is made only if the run asks for one. */
  signal: AbortSource;
  /** Persists the run's transcript before `run:finished` is published, so an acknowledged reply is durable. */
  beforeFinish: (result: EngageResult) => Promise<void>;
}

/** A slash command handler (`/goal …`). Returns the reply text posted to the chat. */
export type SlashCommand = (input: {
  argument: string;
  sessionKey: string;
  agentId: string;
  runId: string;
  signal: AbortSignal;
}) => Promise<string>;

export interface ChatRunRecord {
  runId: string;
  sessionKey: string;
  agentId: string;
  status: RunStatus | 'running';
  text: string;
  userMemoryId?: string;
  assistantMemoryId?: string;
  error?: { code: string; message: string; retryable: boolean };
  startedAt: number;
  endedAt?: number;
  model?: string;
  usage?: { inputTokens: number; outputTokens: number };
}

/** A pending chat message, written before `send` acknowledges it. */
export interface PendingMessage {
  runId: string;
  sessionKey: string;
  agentId: string;
  text: string;
  receivedAt: number;
  /**
   * The process that accepted it (`openOwner`'s name), set by the inbox that stores it: a start leaves the
   * messages of an owner that may be alive (`ownerMayBeAlive`), which runs them itself.
   */
  owner?: string;
}

/** A run whose user message is in the transcript and whose turn has not ended: what a crash interrupts. */
export interface RunningRun {
  runId: string;
  sessionKey: string;
  agentId: string;
  startedAt: number;
  /** The process running it, as the inbox marked it: a start leaves the runs of an owner that may be alive. */
  owner?: string;
}

/**
 * Durable storage for accepted messages whose turn has not started yet, and for runs in progress. An
 * acknowledgement means the message is stored: a message that must wait (its session is busy, or it is a
 * command) is written here before `send` acknowledges, so a crash between the acknowledgement and the turn
 * loses nothing: `resumePending` replays what is left at the next start. A message moves from pending to
 * running in the transaction that appends it to the transcript (the memory append hands the inbox its
 * transaction, `tx`), so a crash can neither lose nor duplicate it. A message whose session is idle
 * takes that step at once, before the acknowledgement, without passing through the pending list. A run
 * still marked running at the next start was interrupted and is reported so.
 */
export interface ChatInbox {
  put(message: PendingMessage): Promise<void>;
  /** With `tx`, in that transaction. */
  delete(runId: string, tx?: SqlExecutor): Promise<void>;
  list(): Promise<PendingMessage[]>;
  /**
   * One pending message. Lets `resumePending` start a backlog larger than the queue's bounds as queued
   * turns start, holding only run ids meanwhile; without it the rest waits for the next start.
   */
  get?(runId: string): Promise<PendingMessage | undefined>;
  /**
   * In the transaction of the run's user message (`tx`); `sessionId` is the instance the message went to.
   * The same write counts `activity` on that session's record (as `SessionStore.touch`): the chat service
   * does not touch the session separately in this commit. It must refuse an instance no longer active as
   * `SessionStore.markRunning` does on SQLite (SessionEndedError): a model turn's session id is checked by
   * this write alone there (`activeId`'s `confirmedByCommit`).
   */
  markRunning(
    run: RunningRun & { sessionId: string; activity: SessionActivity },
    tx?: SqlExecutor,
  ): Promise<void>;
  /**
   * With `activity`, in the transaction of the run's reply (`tx`), which the same write counts on the
   * session's record (instance `activity.sessionId`); without it, from the paths that end a run without a
   * reply.
   */
  markEnded(
    run: {
      runId: string;
      sessionKey: string;
      activity?: SessionActivity & { sessionId: string };
    },
    tx?: SqlExecutor,
  ): Promise<void>;
  /**
   * Ends a run that wrote no reply (it failed, answered nothing, or was stopped before any text), keeping how
   * it ended where `listUnreplied` reads it after a restart: the transcript holds its user message alone.
   */
  markEndedWithoutReply(run: UnrepliedRun, tx?: SqlExecutor): Promise<void>;
  listRunning(): Promise<RunningRun[]>;
  /** Runs that ended without a reply, as `markEndedWithoutReply` kept them (at least each session's last). */
  listUnreplied(): Promise<UnrepliedRun[]>;
  /**
   * The owners (`RunningRun.owner`, `PendingMessage.owner`) whose lease holds now: another host's process,
   * which this one cannot see, is alive while it does. Without it another host's owner counts as gone.
   */
  leasedOwners?(): Promise<ReadonlySet<string>>;
}

export interface CreateChatServiceOptions {
  sessions: SessionStore;
  /** Without an inbox, acknowledged messages live only in memory until their turn starts. */
  inbox?: ChatInbox;
  memory: MemoryService;
  identity: Pick<IdentityLoader, 'systemPrompt'>;
  bus: Bus;
  runTurn: (input: ChatTurnInput) => Promise<EngageResult>;
  /** `name` without the slash → handler. `/stop`, `/new`, `/reset` and `/compact` are built in. */
  slashCommands?: Record<string, SlashCommand>;
  /** Adds relevant long-term memories to the system prompt. Default true. */
  autoRecall?: boolean;
  recallMaxTokens?: number;
  /**
   * How long a session's last automatic recall serves a message sent again with the same text (default 0:
   * every turn searches, unpaced). Other messages search, unless searches have taken more than a tenth of the
   * time, when a session keeps its last block. See `createAutoRecall`.
   */
  recallRefreshMs?: number;
  /**
   * A message waiting in the inbox whose turn finds the store unavailable (a dropped connection, a
   * failover) is tried again after this long, doubling up to 5 s, for `storeRetryForMs` (default 250 ms and
   * 30 s); then the run fails with STORE_UNAVAILABLE.
   */
  storeRetryMs?: number;
  storeRetryForMs?: number;
  /** Longest accepted user message, in characters. */
  maxMessageChars?: number;
  /** How many finished runs are remembered for `wait` and idempotency. */
  maxRememberedRuns?: number;
  /**
   * At `resumePending`, the runs whose transcript entries are this recent (default 10 minutes, as long as
   * the gateway caches an idempotency key's outcome), at most `maxEndedRunsRead` (default 10,000), are read
   * back: a message sent again under the key of one of them is answered with how it ended (`send` →
   * `ended`), not run a second time.
   */
  endedRunsWindowMs?: number;
  maxEndedRunsRead?: number;
  /**
   * Turns accepted but not started yet, per session key and in all (`chat.maxQueuedTurnsPerSession`,
   * default 32, and `chat.maxQueuedTurns`, default 1,000). A message that would wait behind a turn of its
   * session past either is refused with QUEUE_FULL before it is stored; `/stop` never waits.
   */
  maxQueuedTurnsPerSession?: number;
  maxQueuedTurns?: number;
  /** Tells the memory manager and heartbeat that a user-led turn is running for the agent. */
  onTurnActivity?: (agentId: string, active: boolean) => void;
  /** How each automatic recall ended (the recall-success SLO); a reused recall is not reported. */
  onRecall?: (outcome: RecallOutcome) => void;
  clock?: Clock;
  idGenerator: IdGenerator;
  logger?: Logger;
}

/**
 * `send`'s answer: the run started, or the key's run is still queued or running (`in_flight`), or it has
 * ended (`ended`, with how), also before a restart (see `endedRunsWindowMs`): a key is never run twice.
 */
export type ChatSendAck =
  | { runId: string; status: 'started' | 'in_flight' }
  | { runId: string; status: 'ended'; record: ChatRunRecord };

export interface ChatService {
  send(input: {
    sessionKey: string;
    agentId: string;
    text: string;
    idempotencyKey: string;
  }): Promise<ChatSendAck>;
  wait(runId: string, options?: { timeoutMs?: number }): Promise<ChatRunRecord>;
  abort(input: { sessionKey: string; runId?: string }): Promise<{ aborted: boolean; runIds: string[] }>;
  inject(input: ChatInjectInput): Promise<{ memoryId: string }>;
  /** Archives the active session of the key (kept and recallable) and starts a fresh one. */
  reset(input: {
    sessionKey: string;
    agentId: string;
    reason: string;
    archive: boolean;
  }): Promise<{ sessionId: string; previousSessionId?: string; archived: boolean }>;
  /** Summarizes the session's oldest active entries now. */
  compact(input: { sessionKey: string; agentId: string }): Promise<{
    compacted: boolean;
    tokensBefore: number;
    tokensAfter: number;
    entriesBefore: number;
    entriesAfter: number;
  }>;
  get(runId: string): ChatRunRecord | undefined;
  /** Starts the turns of messages that were acknowledged but not started before a crash; returns their run ids. */
  resumePending(): Promise<string[]>;
  /**
   * What `resumePending` does for runs and messages another process left, without reading the transcript
   * again: for a sweep once that process's lease lapsed (`ChatInbox.leasedOwners`). Returns the run ids of
   * the messages it started.
   */
  takeOverGone(): Promise<string[]>;
  /** Runs that have not finished yet. */
  activeRuns(): ChatRunRecord[];
  /** Aborts every running turn and waits for them to persist what they have. */
  drain(): Promise<void>;
  /**
   * Posts an assistant message that no user message asked for (a plan's synthesis, a heartbeat nudge) as a
   * run of its own, so every client sees it like a reply and it is kept in the transcript. Queued in the
   * session's lane behind running turns.
   */
  announce(input: {
    sessionKey: string;
    agentId: string;
    text: string;
    label: string;
  }): Promise<ChatRunRecord>;
}

// C0 control characters other than tab, newline and carriage return.
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are exactly the characters stripped
const controlCharacters = /[\u0001-\u0008\u000b\u000c\u000e-\u001f\u007f]/g;

function normalizeMessage(text: string, maxChars: number): string {
  if (text.includes('\u0000')) {
    throw new UserInputError({ code: ErrorCodes.invalidRequest, message: 'message contains a null byte.' });
  }
  const normalized = text.normalize('NFC').replace(controlCharacters, '');
  if (normalized.length > maxChars) {
    throw new UserInputError({
      code: ErrorCodes.payloadTooLarge,
      message: `message is ${normalized.length} characters; the limit is ${maxChars}.`,
      details: { maxChars },
    });
  }
  if (normalized.trim().length === 0) {
    throw new UserInputError({ code: ErrorCodes.invalidRequest, message: 'message is empty.' });
  }
  return normalized;
}

/**
 * Chat turns: one user message in, one engage-loop run, the transcript persisted through memory before the
 * run is reported finished. Runs of one session key are serialized ("session lane"); different sessions run
 * concurrently.
 */
export function createChatService(options: CreateChatServiceOptions): ChatService {
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? silentLogger;
  const maxMessageChars = options.maxMessageChars ?? 100_000;
  const maxRememberedRuns = options.maxRememberedRuns ?? 1_000;
  const endedRunsWindowMs = options.endedRunsWindowMs ?? 10 * 60_000;
  const maxEndedRunsRead = options.maxEndedRunsRead ?? 10_000;
  const autoRecall = options.autoRecall ?? true;
  const autoRecallBlocks = createAutoRecall({
    search: (ref, query) =>
      traceRecall(options.onRecall, () =>
        options.memory.recallForPrompt({
          agentId: ref.agentId,
          sessionKey: ref.sessionKey,
          query,
          maxTokens: options.recallMaxTokens ?? 400,
        }),
      ),
    clock,
    logger,
    refreshMs: options.recallRefreshMs ?? 0,
    // With `recallRefreshMs`: searches take at most a tenth of the time; past it a session keeps its block.
    maxShare: 0.1,
  });
  const ctx: ChatContext = {
    options,
    clock,
    logger,
    maxMessageChars,
    maxRememberedRuns,
    autoRecall,
    autoRecallBlocks,
    storeRetryMs: options.storeRetryMs ?? 250,
    storeRetryForMs: options.storeRetryForMs ?? 30_000,
    lanes: createKeyedMutex(),
    live: new Map(),
    finished: new Map(),
    endedBeforeStart: createRecentMap({ windowMs: endedRunsWindowMs, maxEntries: maxEndedRunsRead, clock }),
    endedRunsWindowMs,
    maxEndedRunsRead,
    recovering: undefined,
    injectedKeys: createRecentMap({ windowMs: endedRunsWindowMs, maxEntries: maxEndedRunsRead, clock }),
    waiters: new Map(),
    running: new Set(),
    unsettledTurns: new StringDictionary(),
    queue: new TurnQueue({
      maxPerSession: options.maxQueuedTurnsPerSession ?? defaultMaxQueuedTurnsPerSession,
      maxTotal: options.maxQueuedTurns ?? defaultMaxQueuedTurns,
    }),
  };
  const { lanes, live, finished, waiters } = ctx;
  const backlog = new InboxBacklog(ctx);

  const abort: ChatService['abort'] = (input) => abortRuns(ctx, input);

  return {
    async send({ sessionKey, agentId, text, idempotencyKey }) {
      if (ctx.recovering) await ctx.recovering;
      if (live.has(idempotencyKey)) return { runId: idempotencyKey, status: 'in_flight' };
      const ended = finished.get(idempotencyKey) ?? ctx.endedBeforeStart.get(idempotencyKey);
      if (ended) return { runId: idempotencyKey, status: 'ended', record: ended };
      const message = normalizeMessage(text, maxMessageChars);
      const trimmed = message.trim();

      // `/stop` must not queue behind the run it stops.
      if (trimmed === '/stop') {
        const result = await abort({ sessionKey });
        const record = newRecord(ctx, idempotencyKey, sessionKey, agentId);
        const controller = new LazyAbortController();
        const done = (async () => {
          const ref = await refFor(ctx, sessionKey, agentId);
          await runLocalReply(ctx, record, ref, async () =>
            result.aborted ? `Stopped ${result.runIds.length} run(s).` : 'Nothing is running.',
          );
          record.endedAt = clock.now();
          settle(ctx, record);
          return record;
        })();
        live.set(idempotencyKey, { record, controller, done });
        return { runId: idempotencyKey, status: 'started' };
      }

      const turn = { runId: idempotencyKey, sessionKey, agentId, text: message };
      // A message that would wait behind a turn of its session (started, or still being written to the
      // inbox) takes a place in the queue, or is refused (QUEUE_FULL) before anything is stored.
      const waits = ctx.unsettledTurns.has(sessionKey) || ctx.queue.queuedFor(sessionKey) > 0;
      const admitted = waits ? ctx.queue.admit(sessionKey) : undefined;
      // A message its session can take at once is stored by its turn: the user entry and the mark that its
      // run started commit together before the acknowledgement, so it skips the inbox (one commit, not
      // two). Its turn starts here, synchronously, so it holds no place in the queue. Commands and messages
      // that queue behind a run wait in the inbox; so does everything while memory is degraded, where the
      // inbox is the write that can say whether the store took it.
      if (options.inbox && !trimmed.startsWith('/') && !waits && !options.memory.status().degraded) {
        const acceptance = createAcceptance();
        startTurn(ctx, turn, acceptance);
        await acceptance.stored;
        return { runId: idempotencyKey, status: 'started' };
      }
      // Counted from here, through the inbox write, until its turn starts: sends meanwhile wait behind it.
      const slot = admitted ?? ctx.queue.reserve(sessionKey);
      try {
        await options.inbox?.put({ ...turn, receivedAt: clock.now() });
      } catch (error) {
        slot.release();
        throw error;
      }
      startTurn(ctx, turn, undefined, slot);
      return { runId: idempotencyKey, status: 'started' };
    },

    async resumePending() {
      const inbox = options.inbox;
      if (!inbox) return [];
      const recovering = (async (): Promise<OwnerLives> => {
        const lives = await ownersAlive(ctx);
        const marked = await inbox.listRunning();
        await failInterrupted(ctx, lives, marked);
        // Runs another live process is running are not over: their keys are not answered from here.
        await readEndedRuns(ctx, new Set(marked.filter(lives).map((run) => run.runId)));
        return lives;
      })();
      ctx.recovering = recovering.then(
        () => {},
        () => {},
      );
      let lives: OwnerLives;
      try {
        lives = await recovering;
      } finally {
        ctx.recovering = undefined;
      }
      return backlog.resume(lives);
    },

    async takeOverGone() {
      if (!options.inbox) return [];
      const lives = await ownersAlive(ctx);
      await failInterrupted(ctx, lives);
      return backlog.resume(lives);
    },

    wait(runId, waitOptions = {}) {
      const known = finished.get(runId);
      if (known) return Promise.resolve(known);
      const before = ctx.endedBeforeStart.get(runId);
      if (before) return withReplyText(ctx, before);
      if (!live.has(runId)) {
        return Promise.reject(new UserInputError({ code: ErrorCodes.notFound, message: `no run ${runId}` }));
      }
      return new Promise((resolve, reject) => {
        const list = waiters.get(runId) ?? [];
        let timer: NodeJS.Timeout | undefined;
        const onDone = (record: ChatRunRecord) => {
          if (timer) clearTimeout(timer);
          resolve(record);
        };
        list.push(onDone);
        waiters.set(runId, list);
        if (waitOptions.timeoutMs !== undefined) {
          // Past 2^31 - 1 ms Node would fire the timer after 1 ms (TimeoutOverflowWarning).
          const timeoutMs = Math.min(Math.max(0, waitOptions.timeoutMs), maxTimerMs);
          timer = setTimeout(() => {
            // A waiter that timed out leaves the run's list, so one outliving its caller is gone by then.
            const remaining = (waiters.get(runId) ?? []).filter((waiter) => waiter !== onDone);
            if (remaining.length > 0) waiters.set(runId, remaining);
            else waiters.delete(runId);
            reject(
              new UserInputError({
                code: ErrorCodes.timeout,
                message: `run ${runId} did not finish within ${timeoutMs} ms`,
                retryable: true,
              }),
            );
          }, timeoutMs);
        }
      });
    },

    abort,

    async inject(input) {
      if (ctx.recovering) await ctx.recovering;
      return injectNote(ctx, input, normalizeMessage(input.text, maxMessageChars));
    },

    reset: (input) => resetSession(ctx, input),
    compact: (input) => compactSession(ctx, input),
    get: (runId) => live.get(runId)?.record ?? finished.get(runId) ?? ctx.endedBeforeStart.get(runId),
    activeRuns: () => [...live.values()].map((run) => run.record),

    announce({ sessionKey, agentId, text, label }) {
      const runId = options.idGenerator('announce');
      const record = newRecord(ctx, runId, sessionKey, agentId);
      const controller = new LazyAbortController();
      const done = lanes.run(sessionKey, async () => {
        try {
          const ref = await refFor(ctx, sessionKey, agentId);
          await runLocalReply(ctx, record, ref, async () => text, { announcement: label });
        } catch (error) {
          logger.error({ err: error, runId, sessionKey }, 'posting an announcement failed');
          record.status = 'error';
        } finally {
          record.endedAt = clock.now();
          settle(ctx, record);
        }
        return record;
      });
      live.set(runId, { record, controller, done });
      return done;
    },

    async drain() {
      // Messages left in the inbox at start stay there for the next start.
      backlog.stop();
      const running = [...live.values()];
      for (const run of running)
        run.controller.abort(
          new UserInputError({ code: ErrorCodes.aborted, message: 'agentd is shutting down' }),
        );
      await Promise.allSettled(running.map((run) => run.done));
    },
  };
}
