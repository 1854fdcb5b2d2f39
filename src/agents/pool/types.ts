import type { Bus } from '../../bus/index.js';
import type { IdGenerator, Logger } from '../../util/index.js';
import type { SubmitResult, WorkItem, WorkQueue, WorkSubmission } from '../../work/index.js';

export interface RunItemContext {
  /** Aborted when the item is cancelled or paused, its lease is lost, or the pool stops. */
  signal: AbortSignal;
  /** Extends the lease now (the pool also does it on a timer). Throws LEASE_EXPIRED when it was lost. */
  heartbeat(): Promise<void>;
  workerId: string;
}

/** Runs one work item; the resolved value becomes `outcome.data` (give it a `summary` string). */
export type RunItem = (item: WorkItem, context: RunItemContext) => Promise<unknown>;

export interface WorkerClassOptions {
  concurrency: number;
  /** Tasks admitted through `submit` that may wait for a worker; one more is refused with QUEUE_FULL. */
  admissionQueueSize: number;
  /** Kinds this class runs. Exactly one class may omit it: it runs every kind the others do not list. */
  kinds?: string[];
  /** Overrides the pool's `runItem` for this class (the memory manager's tick, for instance). */
  runItem?: RunItem;
}

export interface CreateWorkerPoolOptions {
  queue: WorkQueue;
  runItem: RunItem;
  bus?: Bus;
  logger?: Logger;
  idGenerator?: IdGenerator;
  /** Shorthand for a single `chat` class when `classes` is not given. */
  concurrency?: number;
  admissionQueueSize?: number;
  /** Concurrency classes; e.g. `{ chat: {…}, background: { kinds: ['memory.maintain'], … } }`. */
  classes?: Record<string, WorkerClassOptions>;
  /** Lease renewal period; defaults to a third of the queue's lease. */
  heartbeatIntervalMs?: number;
  /** Claim loops per class (at most its concurrency); more hide the claim round trip at high throughput. */
  claimLoops?: number;
}

export interface WorkerClassSnapshot {
  concurrency: number;
  active: number;
  /** Admitted through `submit`, not yet started. */
  waiting: number;
  admissionQueueSize: number;
}

export interface WorkerPoolSnapshot {
  workerId: string;
  running: boolean;
  paused: boolean;
  classes: Record<string, WorkerClassSnapshot>;
  /** Items in the queue (for the filter): waiting to run, running here or elsewhere, paused, blocked. */
  counts: { queued: number; active: number; paused: number; blocked: number };
  active: Array<{ workItemId: string; title: string; className: string; sessionKey: string | null }>;
}

/** Which items an action applies to: all of a session, of an agent, or the given ids. */
export interface PoolSelector {
  sessionKey?: string;
  agentId?: string;
  ids?: string[];
}

export interface WorkerPool {
  readonly workerId: string;
  start(): void;
  /** Stops claiming, aborts running items (their leases are released so they run again) and waits. */
  stop(): Promise<void>;
  /**
   * Admits a task: refused at once with `QUEUE_FULL` (and an `agent:progress` saturation event) when its
   * class already has `admissionQueueSize` tasks waiting. Never blocks.
   */
  submit(submission: WorkSubmission): Promise<SubmitResult>;
  /** Without a selector: stop claiming. With one: pause those items (running ones are aborted now). */
  pause(selector?: PoolSelector): Promise<string[]>;
  /** Without a selector: claim again. With one: resume those paused items. */
  resume(selector?: PoolSelector): Promise<string[]>;
  /** Cancels the items (and their children); running ones are aborted through their AbortSignal. */
  cancel(selector: PoolSelector): Promise<string[]>;
  snapshot(selector?: Pick<PoolSelector, 'sessionKey' | 'agentId'>): Promise<WorkerPoolSnapshot>;
  /** Resolves when nothing runs here and nothing admitted waits (tests, graceful shutdown). */
  idle(): Promise<void>;
}
