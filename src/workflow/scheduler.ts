import { ErrorCodes, UserInputError } from '../util/index.js';
import { FreshMap } from './fresh-map.js';

export type ScheduledTaskState = 'queued' | 'running' | 'completed' | 'failed';

/** A unit of work the scheduler runs: one workflow run. `run` settles when the run ends. */
export interface ScheduledJob {
  taskId: string;
  /** The submitter's reading of `now()` as it submits, when it has just read it: the job's queued time. */
  submittedAt?: number;
  /** `startedAt`: the executor's reading of `now()` as it starts the job, when it has one. */
  run(startedAt?: number): Promise<'completed' | 'failed'>;
  /**
   * What an executor that knows it calls instead of `run`: the job then reports its end by calling `ended`
   * on `handle` (once; a throw from `start` ends it failed).
   */
  start?(startedAt: number | undefined, handle: JobHandle): void;
}

/**
 * How a job started by `start` reports its end. Synchronous: the executor knows of the end (and
 * starts what was queued behind it) before the job's submitter hears of it, without a promise, its
 * reaction and a turn of the microtask queue per job.
 */
export interface JobHandle {
  ended(result: 'completed' | 'failed'): void;
}

/** `at` is the scheduler's own reading of `now()` for the transition, so a listener need not read it again. */
export interface SchedulerListener {
  queued?(taskId: string, queueDepth: number, at: number): void;
  dequeued?(taskId: string, waitedMs: number, queueDepth: number, at: number): void;
  rejected?(taskId: string, queueDepth: number): void;
}

/**
 * Where workflow runs execute. The in-process FIFO executor below is the default; the agentd runtime can
 * supply one backed by the durable work queue (`src/work/`): `submit` becomes "insert a work item of kind
 * `workflow.run` whose payload names the workflow and task" (the dedup key is the task id), the queue's
 * workers claim items up to their concurrency and call `job.run()`, and `queueDepth`/`running` read the
 * queue's counts. `submit` must throw QUEUE_FULL synchronously when it rejects, so callers see it at once.
 */
export interface TaskExecutor {
  submit(job: ScheduledJob): void;
  /** Removes a job that has not started; true when it was still queued. */
  withdraw(taskId: string): boolean;
  stateOf(taskId: string): ScheduledTaskState | undefined;
  readonly queueDepth: number;
  readonly running: number;
  /** Stop starting queued jobs (running ones continue) until `resume`. */
  pause(): void;
  resume(): void;
  readonly paused: boolean;
  /** Resolves when nothing is queued or running (while paused: when nothing is running). */
  drain(): Promise<void>;
}

export interface FifoExecutorOptions {
  maxConcurrency: number;
  /** Jobs waiting (not running) at most; `null` for unbounded. */
  maxQueueSize: number | null;
  now: () => number;
  listener?: SchedulerListener;
  /** States of finished jobs are remembered for `stateOf`, up to this many. */
  maxRemembered?: number;
}

/**
 * FIFO with real concurrency: up to `maxConcurrency` runs are in flight at once (they interleave at every
 * await, which is where workflows spend their time: model calls, tools, I/O). A job beyond the queue limit
 * is rejected with QUEUE_FULL and never runs.
 */
/** A job's place in the executor: queued, running, or finished and remembered; the running job's handle. */
interface JobEntry extends JobHandle {
  readonly taskId: string;
  /** Let go when the job finishes: a remembered state keeps nothing of the job alive. */
  job: ScheduledJob | undefined;
  readonly queuedAt: number;
  state: ScheduledTaskState;
}

export function createFifoExecutor(options: FifoExecutorOptions): TaskExecutor {
  const queue: Array<JobEntry | undefined> = [];
  let head = 0;
  let running = 0;
  let paused = false;
  // Queued and running jobs are always known; finished ones are remembered in the order they finished,
  // `maxRemembered` at most, through a ring of their entries. (Evicting a map's first key instead would
  // walk over every key deleted before it: thousands of steps per job once the map is full.) One entry per
  // job, whose state changes in place: a map operation per change of state was most of the bookkeeping.
  // A FreshMap: an entry per job comes and goes (see fresh-map.ts).
  const states = new FreshMap<string, JobEntry>();
  const maxRemembered = Math.max(0, options.maxRemembered ?? 10_000);
  const finishOrder: Array<JobEntry | undefined> = [];
  let finishCount = 0;
  let idleWaiters: Array<() => void> = [];
  /**
   * The entries are their jobs' handles: a class of this executor's, so that `ended` reaches `finish`
   * without a closure per job. A second `ended`, or one after the job was withdrawn, does nothing.
   */
  class Entry implements JobEntry {
    state: ScheduledTaskState = 'queued';
    constructor(
      readonly taskId: string,
      public job: ScheduledJob | undefined,
      readonly queuedAt: number,
    ) {}
    ended(result: 'completed' | 'failed'): void {
      if (this.state === 'running') finish(this, result);
    }
  }

  const depth = () => queue.length - head;
  /** Forgets `entry` unless its id has been submitted again since (its entry is then another). */
  const forget = (entry: JobEntry) => {
    if (states.get(entry.taskId) === entry) states.delete(entry.taskId);
  };
  const settleIdle = () => {
    if (running === 0 && (paused || depth() === 0) && idleWaiters.length > 0) {
      const waiters = idleWaiters;
      idleWaiters = [];
      for (const wake of waiters) wake();
    }
  };
  /** Whether `pump` is on the stack: a job that ends as it starts is then not pumped for from within. */
  let pumping = false;
  // `at`: the caller's reading of the clock, when it has just read it (a submit); else read at the first
  // dequeue. Jobs started by one pump start at one moment.
  const pump = (at?: number) => {
    if (pumping) return;
    pumping = true;
    try {
      while (!paused && running < options.maxConcurrency && depth() > 0) {
        const entry = queue[head]!;
        queue[head++] = undefined;
        if (head > 1024 && head * 2 > queue.length) {
          queue.splice(0, head);
          head = 0;
        }
        running++;
        entry.state = 'running';
        if (options.listener?.dequeued) {
          at ??= options.now();
          options.listener.dequeued(entry.taskId, at - entry.queuedAt, depth(), at);
        }
        const job = entry.job!;
        if (job.start) {
          try {
            job.start(at, entry);
          } catch {
            entry.ended('failed');
          }
        } else
          job.run(at).then(
            (result) => entry.ended(result),
            () => entry.ended('failed'),
          );
      }
    } finally {
      pumping = false;
    }
    settleIdle();
  };
  const finish = (entry: JobEntry, result: 'completed' | 'failed') => {
    running--;
    entry.job = undefined;
    entry.state = result;
    if (maxRemembered === 0) forget(entry);
    else {
      const slot = finishCount++ % maxRemembered;
      const evicted = finishOrder[slot];
      if (evicted !== undefined) forget(evicted);
      finishOrder[slot] = entry;
    }
    pump();
  };

  return {
    submit(job) {
      if (
        options.maxQueueSize !== null &&
        depth() >= options.maxQueueSize &&
        (paused || running >= options.maxConcurrency)
      ) {
        options.listener?.rejected?.(job.taskId, depth());
        throw new UserInputError({
          code: ErrorCodes.queueFull,
          message: `The workflow queue is full (${depth()} waiting, max_queue_size ${options.maxQueueSize}); retry later or raise scheduler.max_queue_size.`,
          retryable: true,
          details: { queueDepth: depth(), maxQueueSize: options.maxQueueSize },
        });
      }
      const queuedAt = job.submittedAt ?? options.now();
      const entry = new Entry(job.taskId, job, queuedAt);
      queue.push(entry);
      states.set(job.taskId, entry);
      options.listener?.queued?.(job.taskId, depth(), queuedAt);
      pump(queuedAt);
    },
    withdraw(taskId) {
      for (let index = head; index < queue.length; index++) {
        const entry = queue[index];
        if (entry?.taskId === taskId) {
          queue.splice(index, 1);
          forget(entry);
          settleIdle();
          return true;
        }
      }
      return false;
    },
    stateOf: (taskId) => states.get(taskId)?.state,
    get queueDepth() {
      return depth();
    },
    get running() {
      return running;
    },
    pause() {
      paused = true;
    },
    resume() {
      paused = false;
      pump();
    },
    get paused() {
      return paused;
    },
    drain() {
      if (running === 0 && (paused || depth() === 0)) return Promise.resolve();
      return new Promise((resolve) => idleWaiters.push(resolve));
    },
  };
}
