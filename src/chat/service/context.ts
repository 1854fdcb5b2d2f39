import type {
  Clock,
  createKeyedMutex,
  LazyAbortController,
  Logger,
  RecentMap,
  StringDictionary,
} from '../../util/index.js';
import type { AutoRecall } from '../auto-recall.js';
import type { ChatRunRecord, CreateChatServiceOptions } from '../chat-service.js';
import type { TurnQueue } from './queue.js';

/** A run that has not settled yet: its record, what aborts it and the promise of its end. */
export interface LiveRun {
  record: ChatRunRecord;
  controller: LazyAbortController;
  done: Promise<ChatRunRecord>;
}

/**
 * The chat service's state, created once per service and passed to every step. The maps are the service's
 * only mutable state; the steps change them in place.
 */
export interface ChatContext {
  readonly options: CreateChatServiceOptions;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly maxMessageChars: number;
  readonly maxRememberedRuns: number;
  readonly autoRecall: boolean;
  readonly autoRecallBlocks: AutoRecall;
  /** First wait before a queued turn tries an unavailable store again; doubles each time. */
  readonly storeRetryMs: number;
  /** How long after its first attempt a queued turn still tries an unavailable store again. */
  readonly storeRetryForMs: number;
  /** One lane per session key: runs of a session are serialized. */
  readonly lanes: ReturnType<typeof createKeyedMutex>;
  readonly live: Map<string, LiveRun>;
  readonly finished: Map<string, ChatRunRecord>;
  /**
   * Runs that ended before this start, read back from the transcript at `resumePending`: their idempotency
   * keys are answered with how they ended, for `endedRunsWindowMs` after their end, not run again.
   */
  readonly endedBeforeStart: RecentMap<ChatRunRecord>;
  readonly endedRunsWindowMs: number;
  readonly maxEndedRunsRead: number;
  /**
   * While `resumePending` reads what the last process left (interrupted runs, ended runs), `send` waits for
   * it: a key sent again at once after a restart must find its run there, not start it a second time.
   */
  recovering: Promise<void> | undefined;
  /** `inject`'s idempotency keys: the address of each one's note, for `endedRunsWindowMs` after it was written. */
  readonly injectedKeys: RecentMap<Promise<string>>;
  readonly waiters: Map<string, Array<(record: ChatRunRecord) => void>>;
  /** Runs marked running in the inbox, to be marked ended once their turn is over. */
  readonly running: Set<string>;
  /** Turns per session key that are queued or running and not settled yet. */
  readonly unsettledTurns: StringDictionary<number>;
  /** Turns accepted and not started yet, within `chat.maxQueuedTurnsPerSession` and `chat.maxQueuedTurns`. */
  readonly queue: TurnQueue;
}
