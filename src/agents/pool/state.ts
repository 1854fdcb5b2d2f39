import type { Bus } from '../../bus/index.js';
import { coerceError, createIdGenerator, type Logger, silentLogger } from '../../util/index.js';
import {
  defaultSystemWorkKinds,
  type WorkCompletion,
  type WorkItem,
  type WorkQueue,
} from '../../work/index.js';
import type { CreateWorkerPoolOptions, RunItem, WorkerClassOptions } from './types.js';

/** One concurrency class at run time. */
export interface ClassState {
  name: string;
  options: WorkerClassOptions;
  active: number;
  reserved: number;
  /** Slots a claim in flight may fill. */
  claiming: number;
  /**
   * Loops of the class asleep in `waitForWork`. While one is, the queue was found drained and nothing has
   * woken it since, so the other loops do not claim when a slot frees (they would find nothing) but wait.
   */
  waitingForWork: number;
  admitted: Set<string>;
  waiters: Set<() => void>;
}

/** An item running in this pool. */
export interface Running {
  item: WorkItem;
  className: string;
  controller: AbortController;
  done: Promise<void>;
}

/** A completion waiting for the next batched statement. */
export interface PendingCompletion {
  completion: WorkCompletion & { id: string };
  settle(result: PromiseSettledResult<WorkItem>): void;
}

/**
 * Everything the pool's steps share: its settings, its classes, what runs, and whether it is started,
 * stopped or paused. Built once by `createWorkerPool`.
 */
export interface PoolState {
  readonly queue: WorkQueue;
  readonly bus: Bus | undefined;
  readonly logger: Logger;
  readonly workerId: string;
  readonly runItem: RunItem;
  readonly heartbeatIntervalMs: number;
  readonly claimLoops: number;
  readonly classes: ClassState[];
  /** The class without `kinds`, which runs every kind the others do not list. */
  readonly defaultClass: ClassState | undefined;
  readonly listedKinds: string[];
  readonly running: Map<string, Running>;
  started: boolean;
  stopped: boolean;
  paused: boolean;
  loopController: AbortController;
  readonly loops: Promise<void>[];
  idleWaiters: Array<() => void>;
  readonly pendingCompletions: PendingCompletion[];
  /** A completion statement is on its way to the database. */
  completing: boolean;
  /** The next completion statement waits for the end of this event-loop turn (`setImmediate`). */
  flushScheduled: boolean;
}

export const stoppingReason = 'worker pool stopping';

/** Checks the class options (RangeError when they cannot work) and builds the pool's state. */
export function createPoolState(options: CreateWorkerPoolOptions): PoolState {
  const { queue } = options;
  const idGenerator = options.idGenerator ?? createIdGenerator();
  const classOptions = options.classes ?? {
    chat: { concurrency: options.concurrency ?? 2, admissionQueueSize: options.admissionQueueSize ?? 16 },
  };
  const defaults = Object.entries(classOptions).filter(([, value]) => !value.kinds);
  if (defaults.length > 1) throw new RangeError('at most one worker class may omit `kinds`');
  for (const [name, value] of Object.entries(classOptions)) {
    if (!Number.isInteger(value.concurrency) || value.concurrency < 1) {
      throw new RangeError(`worker class ${name}: concurrency must be a positive integer`);
    }
    if (!Number.isInteger(value.admissionQueueSize) || value.admissionQueueSize < 0) {
      throw new RangeError(`worker class ${name}: admissionQueueSize must be a non-negative integer`);
    }
  }
  const classes: ClassState[] = Object.entries(classOptions).map(([name, value]) => ({
    name,
    options: value,
    active: 0,
    reserved: 0,
    claiming: 0,
    waitingForWork: 0,
    admitted: new Set(),
    waiters: new Set<() => void>(),
  }));
  return {
    queue,
    bus: options.bus,
    logger: (options.logger ?? silentLogger).child({ component: 'workers' }),
    workerId: idGenerator('worker'),
    runItem: options.runItem,
    heartbeatIntervalMs: options.heartbeatIntervalMs ?? Math.max(50, Math.floor(queue.config.leaseMs / 3)),
    claimLoops: Math.max(1, options.claimLoops ?? 3),
    classes,
    defaultClass: classes.find((state) => !state.options.kinds),
    listedKinds: Object.values(classOptions).flatMap((value) => value.kinds ?? []),
    running: new Map(),
    started: false,
    stopped: false,
    paused: false,
    loopController: new AbortController(),
    loops: [],
    idleWaiters: [],
    pendingCompletions: [],
    completing: false,
    flushScheduled: false,
  };
}

export function wakeClass(state: ClassState): void {
  const waiters = [...state.waiters];
  state.waiters.clear();
  for (const resolve of waiters) resolve();
}

export function wakeAll(pool: PoolState): void {
  for (const state of pool.classes) wakeClass(state);
}

export function classFor(pool: PoolState, kind: string): ClassState | undefined {
  return pool.classes.find((state) => state.options.kinds?.includes(kind)) ?? pool.defaultClass;
}

/** Resolves `idle()` waiters once nothing runs and nothing admitted or reserved waits. */
export function checkIdle(pool: PoolState): void {
  if (pool.running.size > 0 || pool.classes.some((state) => state.admitted.size > 0 || state.reserved > 0))
    return;
  const waiters = pool.idleWaiters;
  pool.idleWaiters = [];
  for (const resolve of waiters) resolve();
}

export function progress(
  pool: PoolState,
  phase: 'worker-started' | 'worker-completed' | 'worker-failed' | 'worker-cancelled',
  item: WorkItem,
  message: string,
): void {
  pool.bus?.publish(
    'agent:progress',
    {
      phase,
      message,
      workItemId: item.id,
      ...(item.sessionKey === null && defaultSystemWorkKinds.includes(item.kind) ? { systemWork: true } : {}),
      ...(item.agentId ? { agentId: item.agentId } : {}),
      ...(item.sessionKey ? { sessionKey: item.sessionKey } : {}),
      ...(typeof item.params.planId === 'string' ? { planId: item.params.planId } : {}),
    },
    { workItemId: item.id, ...(item.sessionKey ? { sessionKey: item.sessionKey } : {}) },
  );
}

export function errorPayload(error: unknown): { code: string; message: string; retryable: boolean } {
  const agentdError = coerceError(error);
  return {
    code: agentdError.code,
    message: agentdError.message.slice(0, 2_000),
    retryable: agentdError.retryable,
  };
}
