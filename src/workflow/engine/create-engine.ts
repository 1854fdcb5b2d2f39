import { join } from 'node:path';
import { activeContext, type Context } from '../../telemetry/index.js';
import { AgentdError, ErrorCodes, UserInputError } from '../../util/index.js';
import { errorShape } from '../agent-node.js';
import { runEvaluationSuites } from '../evaluation.js';
import { buildInspection, type InspectionReport } from '../inspector.js';
import { createFifoExecutor, type JobHandle, type ScheduledJob } from '../scheduler.js';
import { statusViewOf } from '../task.js';
import { concludeOpen } from './conclude.js';
import { executeRun, finishRun, settleRun } from './execute-run.js';
import { createRunRegistry } from './registry.js';
import { abortRun, createRunState, newRootTask, type Run, rootSpec, signalOf } from './run-state.js';
import { setupEngine } from './setup.js';
import { startRunSpan, traceWorkflowRun } from './tracing.js';
import type {
  CreateWorkflowEngineOptions,
  QueueStatus,
  RunOptions,
  WorkflowEngine,
  WorkflowRunResult,
} from './types.js';

/** The options of a run given none: one frozen object, not a new empty one per run. */
const noOptions: RunOptions = Object.freeze({});

/**
 * Creates an engine for one loaded workflow. This is the orchestrator only: the steps live beside it —
 * `setup` (tools, credentials, stores), `execute-run` → `execute-stage` → `route` / `conclude`, with
 * `persistence` and `emitter` as the ways out — and the run state they share is `run-state`.
 */
export async function createWorkflowEngine(options: CreateWorkflowEngineOptions): Promise<WorkflowEngine> {
  const { workflow } = options;
  const retainRuns = options.retainRuns ?? 100;
  const setup = await setupEngine(options);
  const { core, vault, adapters, plugins, records, runIds, ownRunOwner } = setup;
  const registry = createRunRegistry({ retainRuns, taskIndex: core.taskIndex, artifacts: core.artifacts });
  const { runs } = registry;
  const indexTask = (taskId: string) => registry.find(taskId);
  // The engine's own run ids are unique by construction (see `createRunIdGenerator`): only ids given by
  // the caller, or by a generator of theirs, can name a task that exists.
  const ownIds = options.idGenerator === undefined;
  /** The run being submitted: the scheduler reports its queueing (and an immediate start) for it. */
  let submitting: Run | undefined;
  const clock = core.clock;

  const schedulerConfig = workflow.manifests.scheduler.scheduler;
  const emitScheduler = (
    type: 'task_queued' | 'task_dequeued' | 'queue_full',
    taskId: string,
    payload: Record<string, unknown>,
    at?: number,
  ) => {
    const run = submitting?.root.taskId === taskId ? submitting : runs.get(taskId);
    if (run) core.emitter.emit(run, type, taskId, undefined, payload, at);
    else core.emitter.emitLoose(type, taskId, payload);
  };
  const executor =
    options.executor ??
    createFifoExecutor({
      maxConcurrency: schedulerConfig.enabled ? schedulerConfig.max_concurrency : 1,
      maxQueueSize: schedulerConfig.max_queue_size,
      // `queueStatus` asks only about the runs this engine retains; the executor's default of 10,000
      // finished states kept that many entries alive, a garbage-collection cost on every short run.
      maxRemembered: retainRuns,
      now: () => clock.now(),
      listener: {
        queued: (taskId, depth, at) => emitScheduler('task_queued', taskId, { queueDepth: depth }, at),
        dequeued: (taskId, waitedMs, depth, at) =>
          emitScheduler('task_dequeued', taskId, { waitedMs, queueDepth: depth }, at),
        rejected: (taskId, depth) =>
          emitScheduler('queue_full', taskId, {
            queueDepth: depth,
            maxQueueSize: schedulerConfig.max_queue_size,
          }),
      },
    });

  await plugins.startup({ workflowId: workflow.id, metadata: workflow.metadata });

  /** Finishes a run and lets the oldest retained one go; gives the result, for `settleRun`. */
  function finish(run: Run): WorkflowRunResult {
    const result = finishRun(core, run);
    registry.retire(run);
    return result;
  }

  /**
   * Ends a run that has executed: finishes it, tells the executor (which may start the run queued next from
   * here), then resolves the run's result. Never throws: a failure to finish the run (a defect) ends its job
   * failed and rejects its result, where it would otherwise be a rejection nobody waits on.
   */
  function end(run: Run): 'completed' | 'failed' {
    const status = run.root.state === 'failed' || run.root.state === 'cancelled' ? 'failed' : 'completed';
    let result: WorkflowRunResult;
    try {
      result = finish(run);
    } catch (error) {
      core.logger.error({ err: error, rootTaskId: run.root.taskId }, 'finishing a workflow run failed');
      run.job?.ended('failed');
      run.reject(error);
      return 'failed';
    }
    run.job?.ended(status);
    settleRun(run, result);
    return status;
  }

  // Not an async function, and an untraced run is ended by `executeRun` itself: the run's own promise is
  // all there is, not an async function's state, its promise and an await, or a reaction of its own. A
  // traced run ends after its span has, as its caller may look at the span once it has the result.
  function execute(run: Run, traceParent: Context, startedAt?: number): Promise<'completed' | 'failed'> {
    const span = startRunSpan(core, run, traceParent);
    if (!span) return executeRun(core, run, startedAt, end);
    return traceWorkflowRun(span, run, traceParent, () => executeRun(core, run, startedAt)).then(
      () => end(run),
      (error) => {
        core.logger.error({ err: error, rootTaskId: run.root.taskId }, 'workflow run crashed');
        concludeOpen(core, run, 'failed', { code: ErrorCodes.internal, message: errorShape(error).message });
        return end(run);
      },
    );
  }

  /**
   * A run handed to `options.dispatch` when the scheduler starts it. A dispatch that rejects before it
   * executed the run (its work item was cancelled or failed first, a refused task id) ends the run here, as
   * a cancel before the start does, so that its result settles and the executor frees its slot.
   */
  function dispatchRun(
    dispatch: NonNullable<CreateWorkflowEngineOptions['dispatch']>,
    run: Run,
    traceParent: Context,
  ): Promise<'completed' | 'failed'> {
    let executing = false;
    return dispatch(
      run.root.taskId,
      (signal) => {
        executing = true;
        return signal ? executeUntilAborted(run, traceParent, signal) : execute(run, traceParent);
      },
      signalOf(run),
    ).catch((error: unknown) => {
      if (executing || run.finished) throw error;
      const shape = AgentdError.isInstance(error)
        ? { code: error.code, message: error.message }
        : { code: ErrorCodes.internal, message: errorShape(error).message };
      concludeOpen(core, run, shape.code === ErrorCodes.aborted ? 'cancelled' : 'failed', shape);
      return end(run);
    });
  }

  /**
   * Executes a dispatched run that `signal` — its executor's, not the run's own — cancels as `cancel` does,
   * already aborted or while it runs. The listener goes when the run ends: the signal may outlive the run.
   */
  function executeUntilAborted(
    run: Run,
    traceParent: Context,
    signal: AbortSignal,
  ): Promise<'completed' | 'failed'> {
    if (signal.aborted) {
      abortRun(run, signal.reason);
      return execute(run, traceParent);
    }
    const onAbort = () => abortRun(run, signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    return execute(run, traceParent).finally(() => signal.removeEventListener('abort', onAbort));
  }

  /**
   * A run as the executor's job. Its end reaches the executor through the handle (`run.job`, see `end`):
   * the promise `execute` gives is not waited on, which would be a promise and a reaction more per run
   * (it never rejects: `end` does not throw, and `executeRun` ends a run whatever its steps threw). An
   * object of fields, not a closure per run.
   */
  class RunJob implements ScheduledJob {
    constructor(
      readonly taskId: string,
      readonly submittedAt: number,
      private readonly target: Run,
      private readonly traceParent: Context,
    ) {}
    start(startedAt: number | undefined, handle: JobHandle): void {
      this.target.job = handle;
      execute(this.target, this.traceParent, startedAt);
    }
    /** For an executor that does not `start` jobs: the run's end is then the promise's. */
    run(startedAt?: number): Promise<'completed' | 'failed'> {
      return execute(this.target, this.traceParent, startedAt);
    }
  }

  function startRun(input: unknown, runOptions: RunOptions, at: number): Run {
    const startNodeId = runOptions.startNodeId ?? workflow.dag.defaultStartId!;
    if (workflow.dag.nodes.get(startNodeId)?.role !== 'start') {
      throw new UserInputError({
        code: ErrorCodes.invalidRequest,
        message: `"${startNodeId}" is not a START node of workflow "${workflow.id}"`,
      });
    }
    const taskId = runOptions.taskId ?? (runIds ? runIds('wft', at) : core.idGenerator('wft'));
    if ((runOptions.taskId !== undefined || !ownIds) && indexTask(taskId))
      throw new UserInputError({
        code: ErrorCodes.conflict,
        message: `a task with id ${taskId} already exists`,
      });
    const root = newRootTask(workflow.id, at, taskId, rootSpec(taskId, input, runOptions.spec));
    const run = createRunState(root, startNodeId);
    registry.add(run);
    const signal = runOptions.signal;
    if (signal) {
      if (signal.aborted) abortRun(run, signal.reason);
      else signal.addEventListener('abort', () => abortRun(run, signal.reason), { once: true });
    }
    return run;
  }

  function enqueue(
    input: unknown,
    runOptions: RunOptions = noOptions,
  ): { taskId: string; result: Promise<WorkflowRunResult> } {
    // One clock reading for the task's creation, its submission and — when a slot is free — its start:
    // they happen in this one synchronous call.
    const at = clock.now();
    const run = startRun(input, runOptions, at);
    const taskId = run.root.taskId;
    // The scheduler starts the run from wherever a slot frees: its span's parent is what enqueued it.
    const traceParent = activeContext();
    try {
      const dispatch = options.dispatch;
      submitting = run;
      executor.submit(
        dispatch
          ? { taskId, submittedAt: at, run: () => dispatchRun(dispatch, run, traceParent) }
          : new RunJob(taskId, at, run, traceParent),
      );
    } catch (error) {
      registry.remove(run);
      throw error;
    } finally {
      submitting = undefined;
    }
    core.metrics.setGauge('queue.depth', executor.queueDepth);
    return { taskId, result: run.result };
  }

  async function inspectTask(taskId: string): Promise<InspectionReport | undefined> {
    const run = indexTask(taskId);
    if (run) {
      return buildInspection({
        taskId,
        tasks: [...run.tasks.values()],
        events: core.emitter.eventsOf(run),
        artifacts: core.artifacts.forRun(run.root.taskId),
        metadata: workflow.metadata,
      });
    }
    const persisted = records ? await records.loadRun(taskId) : undefined;
    return persisted ? buildInspection({ taskId, ...persisted, metadata: workflow.metadata }) : undefined;
  }

  function cancelRun(taskId: string): boolean {
    const run = indexTask(taskId);
    if (!run || run.finished) return false;
    if (executor.withdraw(run.root.taskId)) {
      // Never started: conclude it here so its result settles.
      concludeOpen(core, run, 'cancelled', {
        code: ErrorCodes.aborted,
        message: 'the run was cancelled before it started',
      });
      settleRun(run, finish(run));
      return true;
    }
    abortRun(run, new UserInputError({ code: ErrorCodes.aborted, message: 'the run was cancelled' }));
    return true;
  }

  return {
    workflow,
    metadata: workflow.metadata,
    // Not an async function: that would wrap the run's own promise in another, a few more turns of the
    // microtask queue on every run. A refusal still comes back as a rejection.
    run(input, runOptions = noOptions) {
      try {
        return enqueue(input, runOptions).result;
      } catch (error) {
        return Promise.reject(error);
      }
    },
    enqueue,
    async runQueued() {
      executor.resume();
      await executor.drain();
    },
    pauseQueue: () => executor.pause(),
    queueStatus() {
      const tasks: QueueStatus['tasks'] = [];
      for (const taskId of runs.keys()) {
        const state = executor.stateOf(taskId);
        if (state) tasks.push({ taskId, state });
      }
      return {
        enabled: schedulerConfig.enabled,
        queued: executor.queueDepth,
        running: executor.running,
        paused: executor.paused,
        maxConcurrency: schedulerConfig.max_concurrency,
        maxQueueSize: schedulerConfig.max_queue_size,
        tasks,
      };
    },
    status(taskId) {
      const task = indexTask(taskId)?.tasks.get(taskId);
      return task ? statusViewOf(task) : undefined;
    },
    cancel: (taskId) => cancelRun(taskId),
    async inspect(taskId) {
      const report = await inspectTask(taskId);
      return report && core.redact ? core.redact(report) : report;
    },
    runEvaluations: (evaluationOptions = {}) =>
      runEvaluationSuites({
        workflow,
        run: (input) => enqueue(input).result,
        assertions: options.assertions ?? {},
        schemaChecks: core.schemaChecks as Map<string, (value: unknown) => string | undefined>,
        baselinePath:
          evaluationOptions.baselinePath ??
          (options.stateDir ? join(options.stateDir, 'evaluations', 'baseline.json') : undefined),
        ...(evaluationOptions.suites ? { suites: evaluationOptions.suites } : {}),
        now: () => clock.now(),
      }),
    subscribe: (listener) => core.emitter.subscribe(listener),
    artifacts: (query) => core.artifacts.query(query),
    memory: {
      add: (store, payload, memoryOptions = {}) => core.addMemory(store, payload, memoryOptions),
      list: (store, filter = {}) => core.stores[store].list(filter),
    },
    metrics: () => core.metrics.snapshot(),
    adapters: () => adapters.list(),
    credentials: () => vault.list(),
    async close() {
      executor.pause();
      for (const run of [...runs.values()]) if (!run.finished) cancelRun(run.root.taskId);
      await executor.drain();
      await Promise.all([...runs.values()].map((run) => run.persistQueue));
      await ownRunOwner?.close();
      await plugins.shutdown();
    },
  };
}
