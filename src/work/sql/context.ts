import type { Bus } from '../../bus/index.js';
import type { SqlDatabase } from '../../store/index.js';
import {
  type Clock,
  createIdGenerator,
  type IdGenerator,
  type Logger,
  silentLogger,
  systemClock,
} from '../../util/index.js';
import { type WorkConfig, workConfigSchema } from '../config.js';
import type { AheadBuffer, HandedOut, IdleClaimer } from './ahead.js';

export type QueueConfig = Readonly<Omit<WorkConfig, 'awareness'>>;

/** A bus event or wake-up held back until the transaction that caused it has committed. */
export type Effect = () => void;

/** What changes while a queue runs: its wake-ups, its waiting workers, whether it is closed. */
export interface QueueState {
  /** Increases on every local or remote wake-up (see `WorkQueue.wakeSequence`). */
  wakeSequence: number;
  /** Resolvers of the `waitForWork` calls currently waiting. */
  readonly waiters: Set<() => void>;
  closed: boolean;
  /** When leases were last reaped, so an idle claim reaps at most once a second. */
  lastReapAt: number;
  /**
   * The next backoff or lease deadline `waitForWork` last read, per claim filter; kept only while
   * `hearsRemoteChanges` (see `wait.ts`).
   */
  readonly dueCache: Map<string, { nextDue: number; readAt: number }>;
  /** Set once other processes' changes arrive as wake-ups (a LISTEN connection). */
  hearsRemoteChanges: boolean;
  /** Moves whenever deadlines may have changed, so a read that raced a change is not cached. */
  dueEpoch: number;
  /** Items claimed ahead by completions, per worker and claim filter (see `ahead.ts`). */
  readonly ahead: Map<string, AheadBuffer>;
  /** Items `claimBatch` handed out under claim-ahead, until they complete, fail or are released. */
  readonly handedOut: Map<string, HandedOut>;
  /**
   * Claim-ahead keys (worker and filter) whose last claim from the table took all it asked for, so more
   * is likely waiting; completions claim ahead only for these (see `ahead.ts`).
   */
  readonly backlogged: Set<string>;
  /** Workers of this process waiting for work right now, with their free slots (see `takeIdleSlot`). */
  readonly idle: Set<IdleClaimer>;
}

/**
 * Everything a SQL step needs, fixed when the queue is made. Steps are plain functions of this context,
 * so each can be read and tested alone; `createWorkQueue` only binds them together.
 */
export interface QueueContext {
  readonly db: SqlDatabase;
  readonly isPostgres: boolean;
  readonly bus: Bus | undefined;
  readonly clock: Clock;
  readonly idGenerator: IdGenerator;
  readonly logger: Logger;
  readonly config: QueueConfig;
  /** The NOTIFY channel; processes sharing a database must agree on it. */
  readonly channel: string;
  /** This queue's id in NOTIFY payloads, so it ignores its own notifications. */
  readonly instanceId: string;
  readonly state: QueueState;
}

export interface QueueContextOptions {
  db: SqlDatabase;
  bus?: Bus;
  clock?: Clock;
  idGenerator?: IdGenerator;
  logger?: Logger;
  config?: Partial<Omit<WorkConfig, 'awareness'>>;
  notifyChannel?: string;
}

export function createQueueContext(options: QueueContextOptions): QueueContext {
  const clock = options.clock ?? systemClock;
  const idGenerator = options.idGenerator ?? createIdGenerator({ now: () => clock.now() });
  return {
    db: options.db,
    isPostgres: options.db.dialect === 'postgres',
    bus: options.bus,
    clock,
    idGenerator,
    logger: (options.logger ?? silentLogger).child({ component: 'work' }),
    config: workConfigSchema.parse({ ...options.config, awareness: undefined }),
    channel: options.notifyChannel ?? 'agentd_work',
    instanceId: idGenerator('queue'),
    state: {
      wakeSequence: 0,
      waiters: new Set(),
      closed: false,
      lastReapAt: Number.NEGATIVE_INFINITY,
      dueCache: new Map(),
      hearsRemoteChanges: false,
      dueEpoch: 0,
      ahead: new Map(),
      handedOut: new Map(),
      backlogged: new Set(),
      idle: new Set(),
    },
  };
}

/** Wakes every `waitForWork` call of this process. */
export function wake(state: QueueState): void {
  state.wakeSequence++;
  const pending = [...state.waiters];
  state.waiters.clear();
  for (const resolve of pending) resolve();
}

/** A deadline made here (a lease, a delayed or backed-off item): cached next deadlines move up to it. */
export function noteDeadline(state: QueueState, at: number): void {
  state.dueEpoch++;
  for (const entry of state.dueCache.values()) entry.nextDue = Math.min(entry.nextDue, at);
}

/** Another process changed something: cached deadlines are no longer known to be right. */
export function forgetDeadlines(state: QueueState): void {
  state.dueEpoch++;
  state.dueCache.clear();
}
