import type { Bus } from '../bus/index.js';
import { AgentdError, coerceError, ErrorCodes, UserInputError } from '../util/errors.js';
import { createIdGenerator, type IdGenerator } from '../util/ids.js';
import { type Logger, silentLogger } from '../util/logger.js';
import {
  isTerminalWorkState,
  outcomeSummary,
  type SubmitResult,
  type WorkCompletion,
  WorkErrorCodes,
  type WorkItem,
  type WorkQueue,
  type WorkState,
  type WorkSubmission,
} from '../work/index.js';
import './events.js';

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

interface ClassState {
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

interface Running {
  item: WorkItem;
  className: string;
  controller: AbortController;
  done: Promise<void>;
}

const stoppingReason = 'worker pool stopping';
/** Completions per statement at most (see `complete` in createWorkerPool). */
const maxCompletionBatch = 64;

function errorPayload(error: unknown): { code: string; message: string; retryable: boolean } {
  const agentdError = coerceError(error);
  return {
    code: agentdError.code,
    message: agentdError.message.slice(0, 2_000),
    retryable: agentdError.retryable,
  };
}

/**
 * Worker sub-brains (seed 000 M5): claims work items from the durable queue and runs them with bounded
 * concurrency per class. The memory manager gets its own class so it never takes a chat slot.
 */
export function createWorkerPool(options: CreateWorkerPoolOptions): WorkerPool {
  const { queue, bus } = options;
  const logger = (options.logger ?? silentLogger).child({ component: 'workers' });
  const idGenerator = options.idGenerator ?? createIdGenerator();
  const workerId = idGenerator('worker');
  const claimLoops = Math.max(1, options.claimLoops ?? 3);
  const heartbeatIntervalMs =
    options.heartbeatIntervalMs ?? Math.max(50, Math.floor(queue.config.leaseMs / 3));
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
  const listedKinds = Object.values(classOptions).flatMap((value) => value.kinds ?? []);
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
  const wakeClass = (state: ClassState) => {
    const waiters = [...state.waiters];
    state.waiters.clear();
    for (const resolve of waiters) resolve();
  };
  const defaultClass = classes.find((state) => !state.options.kinds);
  const running = new Map<string, Running>();
  let started = false;
  let stopped = false;
  let paused = false;
  let loopController = new AbortController();
  const loops: Promise<void>[] = [];
  let idleWaiters: Array<() => void> = [];

  const classFor = (kind: string): ClassState | undefined =>
    classes.find((state) => state.options.kinds?.includes(kind)) ?? defaultClass;

  const checkIdle = () => {
    if (running.size > 0 || classes.some((state) => state.admitted.size > 0 || state.reserved > 0)) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const resolve of waiters) resolve();
  };

  const progress = (
    phase: 'worker-started' | 'worker-completed' | 'worker-failed' | 'worker-cancelled',
    item: WorkItem,
    message: string,
  ) =>
    bus?.publish(
      'agent:progress',
      {
        phase,
        message,
        workItemId: item.id,
        ...(item.agentId ? { agentId: item.agentId } : {}),
        ...(item.sessionKey ? { sessionKey: item.sessionKey } : {}),
        ...(typeof item.params.planId === 'string' ? { planId: item.params.planId } : {}),
      },
      { workItemId: item.id, ...(item.sessionKey ? { sessionKey: item.sessionKey } : {}) },
    );

  // An item cancelled, paused or blocked from anywhere (CLI, gateway, its own report_blocked, another
  // process) stops running here.
  const unsubscribe = bus?.subscribe(
    { types: ['work:cancelled', 'work:paused', 'work:blocked'] },
    (event) => {
      const data = event.data as { workItemId: string };
      running
        .get(data.workItemId)
        ?.controller.abort(
          new UserInputError({ code: ErrorCodes.aborted, message: `work item ${event.type.slice(5)}` }),
        );
    },
  );
  // Admitted tasks that stop waiting before this pool starts them (claimed elsewhere, paused, ended) leave
  // the admission queue.
  const unsubscribeTerminal = bus?.subscribe(
    {
      types: ['work:claimed', 'work:paused', 'work:completed', 'work:failed', 'work:dead', 'work:cancelled'],
    },
    (event) => {
      const data = event.data as { workItemId: string; state: WorkState };
      if (event.type !== 'work:claimed' && event.type !== 'work:paused' && !isTerminalWorkState(data.state))
        return;
      for (const state of classes) if (state.admitted.delete(data.workItemId)) checkIdle();
    },
  );

  /**
   * Completions share statements: while one is on its way to the database, items finishing meanwhile wait
   * for the next, which takes them all. An idle pool sends each at once; a busy one pays one statement and
   * one commit per batch instead of per item, and each item keeps its own guard and result (completeMany).
   * On Postgres this took the bench's drain from about 1,500 to 3,000–3,900 jobs/s; a second statement in
   * flight made smaller batches and was slower (2,500–2,700).
   */
  const pendingCompletions: Array<{
    completion: WorkCompletion & { id: string };
    settle(result: PromiseSettledResult<WorkItem>): void;
  }> = [];
  let completing = false;
  const flushCompletions = () => {
    if (completing || pendingCompletions.length === 0) return;
    const batch = pendingCompletions.splice(0, maxCompletionBatch);
    completing = true;
    queue
      .completeMany(
        workerId,
        batch.map((entry) => entry.completion),
      )
      .then(
        (results) => {
          for (const [index, entry] of batch.entries()) entry.settle(results[index]!);
        },
        (error: unknown) => {
          for (const entry of batch) entry.settle({ status: 'rejected', reason: error });
        },
      )
      .finally(() => {
        completing = false;
        flushCompletions();
      });
  };
  const complete = (completion: WorkCompletion & { id: string }) =>
    new Promise<WorkItem>((resolve, reject) => {
      pendingCompletions.push({
        completion,
        settle: (result) => (result.status === 'fulfilled' ? resolve(result.value) : reject(result.reason)),
      });
      flushCompletions();
    });

  const runOne = async (state: ClassState, item: WorkItem, controller: AbortController): Promise<void> => {
    const runner = state.options.runItem ?? options.runItem;
    let timer: NodeJS.Timeout | undefined;
    const startedAt = performance.now();
    try {
      progress('worker-started', item, `started "${item.title}"`);
      const heartbeat = async () => {
        try {
          await queue.heartbeat(item.id, workerId);
        } catch (error) {
          if (AgentdError.isInstance(error) && error.code === WorkErrorCodes.leaseExpired)
            controller.abort(error);
          throw error;
        }
      };
      timer = setInterval(() => {
        heartbeat().catch((error) =>
          logger.warn({ err: error, workItemId: item.id }, 'lease renewal failed'),
        );
      }, heartbeatIntervalMs);
      if (controller.signal.aborted) throw controller.signal.reason;
      const data = await runner(item, { signal: controller.signal, heartbeat, workerId });
      if (controller.signal.aborted) throw controller.signal.reason;
      const done = await complete({
        id: item.id,
        data,
        durationMs: Math.round(performance.now() - startedAt),
      });
      progress(
        'worker-completed',
        done,
        `completed "${done.title}"${outcomeSummary(done) ? `: ${outcomeSummary(done)}` : ''}`,
      );
    } catch (error) {
      if (controller.signal.aborted || stopped) {
        // Cancel and pause already changed the item's state; a stopping pool hands its items back.
        if (stopped && !controller.signal.aborted) controller.abort(stoppingReason);
        if (controller.signal.reason === stoppingReason) {
          await queue.release(item.id, workerId).catch(() => undefined);
        }
        progress('worker-cancelled', item, `stopped "${item.title}"`);
        return;
      }
      const payload = errorPayload(error);
      if (payload.code === WorkErrorCodes.leaseExpired) {
        logger.warn({ workItemId: item.id }, 'lost the lease of a work item; its result was discarded');
        return;
      }
      try {
        const after = await queue.fail(item.id, workerId, payload);
        progress(
          'worker-failed',
          after,
          `"${item.title}" failed: ${payload.message}${after.state === 'queued' ? ' (will retry)' : ''}`,
        );
      } catch (failError) {
        logger.warn({ err: failError, workItemId: item.id }, 'could not record a failed attempt');
      }
    } finally {
      if (timer) clearInterval(timer);
    }
  };

  const launch = (state: ClassState, item: WorkItem) => {
    state.active++;
    state.admitted.delete(item.id);
    const controller = new AbortController();
    const entry: Running = { item, className: state.name, controller, done: Promise.resolve() };
    running.set(item.id, entry);
    entry.done = runOne(state, item, controller).finally(() => {
      running.delete(item.id);
      state.active--;
      wakeClass(state);
      checkIdle();
    });
  };

  // Claimed items start at once, so claim and start are one statement.
  const filterFor = (state: ClassState) => ({
    start: true,
    ...(state.options.kinds
      ? { kinds: state.options.kinds }
      : listedKinds.length > 0
        ? { excludeKinds: listedKinds }
        : {}),
  });

  /**
   * Several claim loops per class: while one claim is on its way to the database, slots freed meanwhile
   * are claimed by another, so a claim round trip does not cap throughput. Free slots are reserved before
   * a claim, so the loops together never claim more than the class may run.
   */
  const loop = async (state: ClassState) => {
    const signal = loopController.signal;
    while (!stopped) {
      const free = state.options.concurrency - state.active - state.claiming;
      if (paused || free <= 0 || state.waitingForWork > 0) {
        await new Promise<void>((resolve) => {
          const done = () => {
            signal.removeEventListener('abort', done);
            state.waiters.delete(done);
            resolve();
          };
          state.waiters.add(done);
          signal.addEventListener('abort', done, { once: true });
        });
        continue;
      }
      const sequence = queue.wakeSequence;
      let items: WorkItem[] = [];
      state.claiming += free;
      try {
        items = await queue.claimBatch(workerId, free, filterFor(state));
      } catch (error) {
        logger.error(
          { err: error, workerClass: state.name },
          'claiming work failed; retrying after the poll interval',
        );
      } finally {
        state.claiming -= free;
      }
      if (stopped) {
        for (const item of items) await queue.release(item.id, workerId).catch(() => undefined);
        return;
      }
      for (const item of items) launch(state, item);
      // Fewer than asked: nothing else was ready, so wait rather than claim again at once. A submission
      // during the claim already moved the sequence, and waitForWork then returns at once.
      if (items.length === free) continue;
      state.waitingForWork++;
      let waitFailed = false;
      try {
        await queue.waitForWork(signal, { sinceSequence: sequence, filter: filterFor(state) });
      } catch (error) {
        waitFailed = true;
        logger.error({ err: error, workerClass: state.name }, 'waiting for work failed');
      } finally {
        state.waitingForWork--;
        // The loops that held back while this one waited may claim again.
        wakeClass(state);
      }
      if (waitFailed) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, queue.config.pollIntervalMs);
          signal.addEventListener(
            'abort',
            () => {
              clearTimeout(timer);
              resolve();
            },
            { once: true },
          );
        });
      }
    }
  };

  const select = async (selector: PoolSelector, states: ReadonlyArray<WorkState>): Promise<WorkItem[]> => {
    if (selector.ids) {
      return (await queue.getMany(selector.ids)).filter(
        (item) =>
          states.includes(item.state) &&
          (selector.sessionKey === undefined || item.sessionKey === selector.sessionKey) &&
          (selector.agentId === undefined || item.agentId === selector.agentId),
      );
    }
    if (selector.sessionKey === undefined && selector.agentId === undefined) {
      throw new UserInputError({
        code: ErrorCodes.invalidRequest,
        message: 'say which tasks: a session, an agent or ids.',
      });
    }
    // Oldest first: resumed items then run in the order they were submitted, whatever claims them meanwhile.
    return queue.list({
      states,
      order: 'oldest',
      ...(selector.sessionKey !== undefined ? { sessionKey: selector.sessionKey } : {}),
      ...(selector.agentId !== undefined ? { agentId: selector.agentId } : {}),
      limit: 10_000,
    });
  };

  const applyEach = async (
    items: WorkItem[],
    action: (item: WorkItem) => Promise<unknown>,
  ): Promise<string[]> => {
    const done: string[] = [];
    for (const item of items) {
      try {
        await action(item);
        done.push(item.id);
      } catch (error) {
        // It moved on (finished, or was cancelled with its parent) between the read and the change.
        logger.debug({ err: error, workItemId: item.id }, 'pool action skipped an item');
      }
    }
    return done;
  };

  const wakeAll = () => {
    for (const state of classes) wakeClass(state);
  };

  return {
    workerId,
    start() {
      if (started) return;
      started = true;
      stopped = false;
      loopController = new AbortController();
      for (const state of classes) {
        for (let index = 0; index < Math.min(claimLoops, state.options.concurrency); index++)
          loops.push(loop(state));
      }
    },
    async stop() {
      stopped = true;
      loopController.abort();
      wakeAll();
      for (const entry of running.values()) entry.controller.abort(stoppingReason);
      await Promise.all([...loops.splice(0), ...[...running.values()].map((entry) => entry.done)]);
      unsubscribe?.();
      unsubscribeTerminal?.();
      started = false;
    },
    async submit(submission) {
      const state = classFor(submission.kind);
      if (!state) {
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: `no worker class runs work of kind "${submission.kind}".`,
        });
      }
      const depth = state.admitted.size + state.reserved;
      if (depth >= state.options.admissionQueueSize) {
        bus?.publish(
          'agent:progress',
          {
            phase: 'saturated',
            message: `${state.name} workers are saturated: ${depth} task(s) already wait (limit ${state.options.admissionQueueSize}); the task was refused.`,
            queueDepth: depth,
            limit: state.options.admissionQueueSize,
            ...(submission.agentId ? { agentId: submission.agentId } : {}),
            ...(submission.sessionKey ? { sessionKey: submission.sessionKey } : {}),
          },
          submission.sessionKey ? { sessionKey: submission.sessionKey } : {},
        );
        throw new UserInputError({
          code: ErrorCodes.queueFull,
          message: `The ${state.name} work queue is full (${state.options.admissionQueueSize} waiting). Try again when tasks finish.`,
          retryable: true,
          details: { workerClass: state.name, queueDepth: depth, limit: state.options.admissionQueueSize },
        });
      }
      // Reserved synchronously so concurrent submissions cannot all pass the check before any is counted.
      state.reserved++;
      try {
        const result = await queue.submit(submission);
        if (!result.merged) {
          const item = await queue.get(result.id);
          if (
            item &&
            !isTerminalWorkState(item.state) &&
            item.state !== 'claimed' &&
            item.state !== 'running'
          ) {
            state.admitted.add(result.id);
          }
        }
        return result;
      } finally {
        state.reserved--;
        checkIdle();
      }
    },
    async pause(selector) {
      if (!selector) {
        paused = true;
        return [];
      }
      const items = await select(selector, ['queued', 'blocked', 'claimed', 'running']);
      return applyEach(items, (item) => queue.pause(item.id, { reason: 'paused by request' }));
    },
    async resume(selector) {
      if (!selector) {
        paused = false;
        wakeAll();
        return [];
      }
      const items = await select(selector, ['paused']);
      return applyEach(items, (item) => queue.resume(item.id));
    },
    async cancel(selector) {
      const items = await select(selector, ['queued', 'blocked', 'claimed', 'running', 'paused']);
      const ids = await applyEach(items, (item) => queue.cancel(item.id, { reason: 'cancelled by request' }));
      for (const id of ids) {
        for (const state of classes) state.admitted.delete(id);
      }
      checkIdle();
      return ids;
    },
    async snapshot(selector = {}) {
      const counts = await queue.counts(selector);
      const activeHere = [...running.values()].filter(
        (entry) =>
          (selector.sessionKey === undefined || entry.item.sessionKey === selector.sessionKey) &&
          (selector.agentId === undefined || entry.item.agentId === selector.agentId),
      );
      return {
        workerId,
        running: started && !stopped,
        paused,
        classes: Object.fromEntries(
          classes.map((state) => [
            state.name,
            {
              concurrency: state.options.concurrency,
              active: state.active,
              waiting: state.admitted.size,
              admissionQueueSize: state.options.admissionQueueSize,
            },
          ]),
        ),
        counts: {
          queued: counts.queued,
          active: counts.claimed + counts.running,
          paused: counts.paused,
          blocked: counts.blocked,
        },
        active: activeHere.map((entry) => ({
          workItemId: entry.item.id,
          title: entry.item.title,
          className: entry.className,
          sessionKey: entry.item.sessionKey,
        })),
      };
    },
    idle() {
      return new Promise<void>((resolve) => {
        idleWaiters.push(resolve);
        checkIdle();
      });
    },
  };
}
