import { z } from 'zod';
import type { Bus, BusEventMap } from '../bus/index.js';
import type { LanguageModel } from '../model/index.js';
import { completeModel, isOfflineModelText, localModelMarker, offlineWorkNotice } from '../model/index.js';
import {
  AgentdError,
  type Clock,
  createIdGenerator,
  ErrorCodes,
  type IdGenerator,
  type Logger,
  ProviderError,
  parseUntrustedJson,
  silentLogger,
  sleep,
  systemClock,
  UserInputError,
} from '../util/index.js';
import {
  isTerminalWorkState,
  itemMovedOn,
  outcomeSummary,
  type SubmitResult,
  type WorkItem,
  type WorkQueue,
  type WorkState,
  type WorkSubmission,
} from '../work/index.js';
import type { PlannedTaskSummary } from './events.js';
import type { GoalClaims } from './goal-claims.js';
import './events.js';

/** What the model must return for a goal (an immediate reply and a short task list). */
export const planSchema = z.object({
  reply: z.string().min(1),
  tasks: z
    .array(
      z.object({
        title: z.string().min(1).max(200),
        description: z.string().max(20_000).default(''),
        // Structured-output fillers send "" for "no agent"; both mean "the planning agent itself".
        agent: z
          .string()
          .max(128)
          .optional()
          .transform((value) => (value ? value : undefined)),
      }),
    )
    .max(50),
});

export type ModelPlan = z.infer<typeof planSchema>;

const planJsonSchema = {
  type: 'object',
  properties: {
    reply: { type: 'string', description: 'What to tell the user right away' },
    tasks: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          title: { type: 'string' },
          description: { type: 'string' },
          agent: { type: 'string', description: 'Agent id to delegate to; omit for yourself' },
        },
        required: ['title', 'description'],
      },
    },
  },
  required: ['reply', 'tasks'],
};

/** A plan entry written to the session's memory (RAM) as a system entry. */
export interface PlanMemoryWrite {
  sessionKey: string;
  agentId: string;
  role: 'system';
  content: string;
}

export interface PlanTaskResult {
  workItemId: string;
  title: string;
  state: WorkState;
  summary?: string;
  error?: string;
}

export interface Synthesis {
  planId: string;
  goal: string;
  text: string;
  tasks: PlanTaskResult[];
}

export interface PlanResult {
  planId: string;
  reply: string;
  tasks: PlannedTaskSummary[];
  /** Tasks the workers refused (saturation); they were not created. */
  rejected: Array<{ title: string; code: string; message: string }>;
  /** Resolves with the synthesis once every task has ended. */
  finished: Promise<Synthesis>;
  /**
   * The plan an earlier request with the same idempotency key made (or is making): its synthesis is
   * announced to that request alone, so whoever waits for this one's must take it from `finished`.
   */
  replayed?: true;
}

export interface CreatePlannerOptions {
  model: LanguageModel;
  queue: WorkQueue;
  bus: Bus;
  /** How tasks enter the queue: the worker pool's admission-checked `submit`, or the queue's. */
  submitTask?: (submission: WorkSubmission) => Promise<SubmitResult>;
  /**
   * Writes the plan to the session's memory once its tasks are released. Best effort: failures are logged
   * and the caller is not told (see docs/agents.md, "Planner").
   */
  memoryWriter?: (write: PlanMemoryWrite) => Promise<unknown>;
  /** Called with the synthesis when all tasks of a plan ended (the lead posts it to the chat). */
  onSynthesis?: (synthesis: Synthesis & { agentId: string; sessionKey: string }) => void;
  idGenerator?: IdGenerator;
  /** Tells when a held task is old enough to be an orphan of a planning that died with its process. */
  clock?: Clock;
  /**
   * Which process plans a keyed goal when several share the database (`createSqlGoalClaims`): a retry that
   * reaches another process while the first plans waits for it. Without it, the wait is per process.
   */
  claims?: GoalClaims;
  /** How often a keyed goal that another process is planning looks whether it was answered (default 100 ms). */
  claimPollMs?: number;
  /** Sessions whose latest plan `latest` answers (default 1,000); older ones are forgotten, oldest first. */
  maxRememberedPlans?: number;
  /**
   * Idempotency keys whose answer is kept in memory (default 1,000), the oldest forgotten first; a forgotten
   * key is looked for in the work queue (see docs/agents.md, "Idempotency keys").
   */
  maxRememberedKeys?: number;
  logger?: Logger;
  maxTasks?: number;
  /** Work item kind of planned tasks. */
  taskKind?: string;
  maxPlanBytes?: number;
}

export interface PlanRequest {
  goal: string;
  sessionKey: string;
  agentId: string;
  /**
   * Names this goal within the session: sent again, it is answered with the plan it already made (or is
   * making) rather than planned twice; with another goal, it is `CONFLICT`.
   */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** The last plan of a session as it stands now (`agent.control {action:"plan"}`). */
export interface PlanSnapshot {
  planId: string;
  goal: string;
  reply: string;
  tasks: Array<{ workItemId: string; title: string; state: WorkState }>;
}

export interface Planner {
  plan(request: PlanRequest): Promise<PlanResult>;
  /** The session's most recent plan with its tasks' current states; undefined when it has none here. */
  latest(sessionKey: string): Promise<PlanSnapshot | undefined>;
}

/** The JSON object in a reply, whether bare, fenced or surrounded by prose. */
function extractJson(text: string): string {
  const fenced = /```(?:json)?\s*([\s\S]*?)```/.exec(text);
  const candidate = fenced ? fenced[1]! : text;
  const start = candidate.indexOf('{');
  const end = candidate.lastIndexOf('}');
  return start >= 0 && end > start ? candidate.slice(start, end + 1) : candidate;
}

/**
 * Planning holds its tasks (paused) only while it writes and announces them, milliseconds to seconds. A held
 * task this much older was left by a planning whose process died; one younger may be another process's
 * planning still under way.
 */
const orphanedAfterMs = 10 * 60_000;

/** Written paused by `plan` and not yet released: only `pause` gives a paused item a reason. */
function isHeldTask(item: WorkItem): boolean {
  return item.state === 'paused' && item.source === 'planner' && item.stateReason === null;
}

const failedPlanReason = 'its plan failed before its tasks were released';

function isTaskOfFailedPlan(item: WorkItem): boolean {
  return item.state === 'cancelled' && item.stateReason === failedPlanReason;
}

/**
 * A key no longer in memory is looked for among this many of the session's newest tasks: the read goes through
 * the session's index and sorts the session's items, but only this many are decoded; a retry after a lost
 * answer comes long before a session has planned this many more.
 */
const storedKeyWindow = 1_000;

/**
 * What each task of a plan made with an idempotency key carries besides `total`, so that any one of them
 * answers a retry as the plan was answered: the model's reply, and the titles planned (those without a
 * task were refused).
 */
const keyedTaskParamsSchema = z.object({
  planId: z.string(),
  index: z.number().int().nonnegative(),
  goal: z.string(),
  idempotencyKey: z.string(),
  reply: z.string(),
  titles: z.array(z.string()),
});

type KeyedTaskParams = z.infer<typeof keyedTaskParamsSchema>;

const replayOf = (result: PlanResult): PlanResult => ({ ...result, replayed: true });

/** The `agent:synthesis` event of a plan's synthesis, for the session and agent of its goal. */
export function synthesisEvent(
  synthesis: Synthesis,
  scope: { agentId: string; sessionKey: string },
): BusEventMap['agent:synthesis'] {
  return {
    planId: synthesis.planId,
    agentId: scope.agentId,
    sessionKey: scope.sessionKey,
    goal: synthesis.goal,
    text: synthesis.text,
    tasks: synthesis.tasks.map(({ workItemId, title, state, summary }) => ({
      workItemId,
      title,
      state,
      ...(summary !== undefined ? { summary } : {}),
    })),
  };
}

function keyUsedForAnotherGoal(key: string): UserInputError {
  return new UserInputError({
    code: ErrorCodes.conflict,
    message: `the idempotency key "${key}" was already used in this session for another goal; send a new goal with a new key.`,
  });
}

function replyWithRefusals(reply: string, refused: number): string {
  return refused > 0
    ? `${reply}\n(${refused} task(s) were refused because the workers are saturated.)`
    : reply;
}

function synthesisOf(planId: string, goal: string, items: WorkItem[]): Synthesis {
  const tasks: PlanTaskResult[] = items.map((item) => {
    const summary = outcomeSummary(item);
    const error = item.outcome?.error?.message;
    return {
      workItemId: item.id,
      title: item.title,
      state: item.state,
      ...(summary !== undefined ? { summary } : {}),
      ...(error !== undefined ? { error } : {}),
    };
  });
  return { planId, goal, text: synthesize(goal, tasks), tasks };
}

function stateMark(state: WorkState): string {
  if (state === 'completed') return '✓';
  if (state === 'cancelled') return '–';
  return '✗';
}

/** A task "completed" by the offline model was only acknowledged: it must not look done. */
function answeredOffline(task: PlanTaskResult): boolean {
  return task.state === 'completed' && task.summary !== undefined && isOfflineModelText(task.summary);
}

/** The deterministic synthesis posted to the chat: what each task came to. */
export function synthesize(goal: string, tasks: PlanTaskResult[]): string {
  const offline = tasks.filter(answeredOffline).length;
  const completed = tasks.filter((task) => task.state === 'completed').length - offline;
  const lines = tasks.map((task) => {
    const detail = (task.summary ?? task.error ?? task.state).replace(offlineWorkNotice, '').trim();
    const mark = answeredOffline(task) ? '○' : stateMark(task.state);
    return `${mark} ${task.title}: ${detail.replace(/\s+/g, ' ').slice(0, 400)}`;
  });
  const tail =
    offline > 0
      ? `${localModelMarker} ${offline} of ${tasks.length} task(s) were only acknowledged by the offline model (○); ` +
        `${completed === 0 ? 'none was' : `${completed} ${completed === 1 ? 'was' : 'were'}`} done for real. ${offlineWorkNotice}`
      : completed === tasks.length
        ? 'All tasks completed.'
        : `${completed} of ${tasks.length} task(s) completed.`;
  return [`Results for "${goal.slice(0, 200)}":`, ...lines, tail].join('\n');
}

/**
 * The Primary Brain planner: a goal becomes an immediate reply, a task list of work items
 * and a memory write, using the agent's model with structured JSON output; it follows the tasks and
 * publishes one synthesis when all have ended.
 */
export function createPlanner(options: CreatePlannerOptions): Planner {
  const { model, queue, bus } = options;
  const logger = (options.logger ?? silentLogger).child({ component: 'planner' });
  const idGenerator = options.idGenerator ?? createIdGenerator();
  const clock = options.clock ?? systemClock;
  const submitTask = options.submitTask ?? ((submission: WorkSubmission) => queue.submit(submission));
  const maxTasks = options.maxTasks ?? 5;
  const maxRememberedPlans = options.maxRememberedPlans ?? 1_000;
  const maxRememberedKeys = options.maxRememberedKeys ?? 1_000;
  const taskKind = options.taskKind ?? 'task';
  const maxPlanBytes = options.maxPlanBytes ?? 256 * 1024;
  const { claims } = options;
  const claimPollMs = options.claimPollMs ?? 100;

  const askModel = async (request: PlanRequest): Promise<ModelPlan> => {
    const response = await completeModel(
      model,
      {
        messages: [
          {
            role: 'system',
            content:
              'You are the Primary Brain planner. Turn the user goal into an immediate reply and a short list of ' +
              `independent tasks (at most ${maxTasks}) that workers can carry out in parallel. Reply with one JSON object ` +
              '{"reply": string, "tasks": [{"title": string, "description": string, "agent"?: string}]} and nothing else.',
          },
          { role: 'user', content: request.goal },
        ],
        responseFormat: { type: 'json', schema: planJsonSchema, name: 'plan' },
        metadata: { purpose: 'plan', goal: request.goal, maxTasks },
      },
      request.signal ? { signal: request.signal } : {},
    );
    if (response.error) {
      if (response.error.code === ErrorCodes.aborted) {
        throw new UserInputError({ code: ErrorCodes.aborted, message: 'planning was aborted.' });
      }
      throw new ProviderError({
        code: response.error.code,
        message: `the model could not plan: ${response.error.message}`,
        retryable: response.error.retryable,
      });
    }
    try {
      return parseUntrustedJson(extractJson(response.text), planSchema, {
        maxBytes: maxPlanBytes,
        what: 'the plan',
      });
    } catch (error) {
      // A model that ignores the format still gets the goal done: as one task, with its text as the reply.
      logger.warn({ err: error }, 'the model did not return a readable plan; planning the goal as one task');
      return {
        reply: response.text.trim() || `I will work on: ${request.goal}`,
        tasks: [{ title: request.goal.slice(0, 120), description: request.goal, agent: undefined }],
      };
    }
  };

  const follow = (
    planId: string,
    request: PlanRequest,
    tasks: PlannedTaskSummary[],
    unsubscribe: () => void,
    tracked: Map<string, { index: number; title: string; last?: WorkState }>,
  ): Promise<Synthesis> =>
    new Promise<Synthesis>((resolve) => {
      let done = false;
      const finish = async () => {
        if (done) return;
        const items = await queue.getMany(tasks.map((task) => task.workItemId));
        if (done || !items.every((item) => isTerminalWorkState(item.state))) return;
        done = true;
        unsubscribe();
        const synthesis = synthesisOf(planId, request.goal, items);
        bus.publish(
          'agent:progress',
          {
            phase: 'synthesis',
            message: 'all tasks ended; posting the synthesis',
            planId,
            agentId: request.agentId,
            sessionKey: request.sessionKey,
          },
          { sessionKey: request.sessionKey, agentId: request.agentId },
        );
        bus.publish('agent:synthesis', synthesisEvent(synthesis, request), {
          sessionKey: request.sessionKey,
          agentId: request.agentId,
        });
        options.onSynthesis?.({ ...synthesis, agentId: request.agentId, sessionKey: request.sessionKey });
        resolve(synthesis);
      };
      finishHooks.set(planId, () => {
        // The last task's completion is reported from inside the queue; let the worker that finished it
        // publish its own progress first, so the synthesis is always the last event of a plan.
        setImmediate(() => {
          finish().catch((error) => logger.error({ err: error, planId }, 'could not build the synthesis'));
        });
      });
      if (tracked.size === 0) void finish();
    });

  const finishHooks = new Map<string, () => void>();
  // Only the most recent plan per session: the queue keeps the tasks, this keeps which ones formed it.
  const latestPlans = new Map<string, { planId: string; goal: string; reply: string; taskIds: string[] }>();
  // The tasks of plans that failed here, until they are cancelled: the write that failed the plan (a full
  // disk) usually refuses their cancel too.
  const abandoned = new Map<string, string[]>();

  const cancelTask = (id: string) =>
    queue.cancel(id, { reason: failedPlanReason }).then(
      () => undefined,
      (error: unknown) => {
        // A task that ended or went away meanwhile needs no cancel.
        if (!itemMovedOn(error)) throw error;
      },
    );

  /**
   * Cancels the tasks no planning will release, so a goal that failed leaves none to run or to hold: those
   * of plans that failed here, and held tasks old enough to be orphans of a crash (of any process on this
   * database).
   */
  const cancelOrphans = async () => {
    for (const [planId, ids] of abandoned) {
      for (const item of await queue.getMany(ids)) {
        if (!isTerminalWorkState(item.state)) await cancelTask(item.id);
      }
      abandoned.delete(planId);
    }
    const stale = await queue.list({
      states: ['paused'],
      kind: taskKind,
      updatedBefore: clock.now() - orphanedAfterMs,
      order: 'oldest',
      limit: 100,
    });
    for (const item of stale) if (isHeldTask(item)) await cancelTask(item.id);
  };

  /**
   * Resolves once every task of a plan found by its key has ended. Silent: the planning that made the plan
   * (here before a restart, or in another process) announced it, and posting its synthesis again could repeat
   * it in the chat.
   */
  const endOfStoredPlan = (planId: string, goal: string, taskIds: string[]): Promise<Synthesis> =>
    new Promise<Synthesis>((resolve) => {
      let done = false;
      const check = () => {
        queue
          .getMany(taskIds)
          .then((items) => {
            if (done || !items.every((item) => isTerminalWorkState(item.state))) return;
            done = true;
            unsubscribe();
            resolve(synthesisOf(planId, goal, items));
          })
          .catch((error: unknown) =>
            logger.error({ err: error, planId }, 'could not read the tasks of a plan'),
          );
      };
      const unsubscribe = bus.subscribe(
        { types: ['work:completed', 'work:failed', 'work:dead', 'work:cancelled'] },
        (event) => {
          if (taskIds.includes(event.data.workItemId)) check();
        },
      );
      check();
    });

  /**
   * The plan a goal with this key made in this session, found through its tasks: how a retry is answered after a
   * restart or once the key has left memory. A plan that failed answered nothing, so it is passed over.
   */
  const findStoredPlan = async (
    sessionKey: string,
    key: string,
    goal: string,
  ): Promise<PlanResult | undefined> => {
    const recent = await queue.list({ sessionKey, kind: taskKind, order: 'newest', limit: storedKeyWindow });
    const plans = new Map<string, Array<{ item: WorkItem; params: KeyedTaskParams }>>();
    for (const item of recent) {
      const parsed = keyedTaskParamsSchema.safeParse(item.params);
      if (item.source !== 'planner' || !parsed.success || parsed.data.idempotencyKey !== key) continue;
      plans.set(parsed.data.planId, [
        ...(plans.get(parsed.data.planId) ?? []),
        { item, params: parsed.data },
      ]);
    }
    for (const [planId, tasks] of plans) {
      // Held tasks (a planning that died, or one under way in another process) and those a failure cancelled
      // answered nothing: the goal is planned afresh.
      if (tasks.some(({ item }) => isHeldTask(item) || isTaskOfFailedPlan(item))) continue;
      const { params } = tasks[0]!;
      if (params.goal !== goal) throw keyUsedForAnotherGoal(key);
      tasks.sort((a, b) => a.params.index - b.params.index);
      const written = new Set(tasks.map((task) => task.params.index));
      const rejected = params.titles.flatMap((title, index) =>
        written.has(index)
          ? []
          : [
              {
                title,
                code: ErrorCodes.queueFull,
                message: 'the workers were saturated when the goal was planned.',
              },
            ],
      );
      return {
        planId,
        reply: replyWithRefusals(params.reply, rejected.length),
        tasks: tasks.map(({ item }) => ({
          workItemId: item.id,
          title: item.title,
          description: item.description,
          agentId: item.agentId,
        })),
        rejected,
        finished: endOfStoredPlan(
          planId,
          goal,
          tasks.map(({ item }) => item.id),
        ),
        replayed: true,
      };
    }
    return undefined;
  };

  // Keyed goals being answered, by session and key: a duplicate waits for the first instead of planning.
  const keyedInFlight = new Map<string, { goal: string; result: Promise<PlanResult> }>();
  // Keyed goals answered, the most recent only; an older key is found again through its tasks.
  const keyedAnswered = new Map<string, { goal: string; result: Promise<PlanResult> }>();

  /**
   * A keyed goal no request of this process is answering: its stored plan, else planned here. With `claims`,
   * only under the key's claim: while another process holds it, this waits (the goal it plans compared with
   * this one first), then finds the plan it wrote or, when it failed, plans afresh.
   */
  const answerKeyed = async (request: PlanRequest, key: string, goal: string): Promise<PlanResult> => {
    const { sessionKey } = request;
    if (!claims) return (await findStoredPlan(sessionKey, key, goal)) ?? planGoal(request, goal);
    for (;;) {
      const claim = await claims.claim(sessionKey, key, goal);
      if (claim.claimed) {
        try {
          return (await findStoredPlan(sessionKey, key, goal)) ?? (await planGoal(request, goal));
        } finally {
          // Unreleased, the claim lapses after its lease and the next request with the key takes it over.
          await claims
            .release(sessionKey, key)
            .catch((error: unknown) => logger.warn({ err: error, key }, 'could not release a goal claim'));
        }
      }
      if (claim.goal !== goal) throw keyUsedForAnotherGoal(key);
      await sleep(claimPollMs, request.signal);
    }
  };

  const planGoal = async (request: PlanRequest, goal: string): Promise<PlanResult> => {
    const planId = idGenerator('plan');
    const scope = { sessionKey: request.sessionKey, agentId: request.agentId };
    bus.publish(
      'agent:progress',
      { phase: 'planner-received', message: `planning: ${goal.slice(0, 200)}`, planId, ...scope },
      scope,
    );
    // Best effort: a failure here keeps them for the next goal, and this goal meets the same cause in its
    // own writes if it persists.
    await cancelOrphans().catch((error: unknown) =>
      logger.warn({ err: error, planId }, 'could not cancel the tasks of failed plans'),
    );
    const modelPlan = await askModel({ ...request, goal });
    const planned = modelPlan.tasks.slice(0, maxTasks);

    const tracked = new Map<string, { index: number; title: string; last?: WorkState }>();
    const total = planned.length;
    const answer =
      request.idempotencyKey === undefined
        ? {}
        : {
            idempotencyKey: request.idempotencyKey,
            reply: modelPlan.reply,
            titles: planned.map((task) => task.title),
          };
    const publishStatus = (id: string, state: WorkState, summary?: string) => {
      const entry = tracked.get(id);
      if (!entry || entry.last === state || (entry.last && isTerminalWorkState(entry.last))) return;
      entry.last = state;
      bus.publish(
        'agent:status',
        {
          planId,
          workItemId: id,
          title: entry.title,
          state,
          index: entry.index,
          total,
          ...(summary ? { summary } : {}),
        },
        { ...scope, workItemId: id },
      );
      if (isTerminalWorkState(state)) finishHooks.get(planId)?.();
    };
    const holding = new Set<string>();
    const resumedHeld = new Set<string>();
    // Subscribed before the first submission so no state change of a task can slip by.
    const unsubscribe = bus.subscribe(
      {
        types: [
          'work:started',
          'work:completed',
          'work:failed',
          'work:dead',
          'work:cancelled',
          'work:paused',
          'work:resumed',
          'work:blocked',
        ],
      },
      (event) => {
        const { data } = event;
        if (tracked.get(data.workItemId)?.last === undefined) return;
        // The hold while the plan is announced is the planner's own bookkeeping, not a task state change.
        if (
          holding.has(data.workItemId) ||
          (event.type === 'work:resumed' && resumedHeld.delete(data.workItemId))
        )
          return;
        publishStatus(data.workItemId, data.state, 'summary' in data ? data.summary : undefined);
      },
    );

    const tasks: PlannedTaskSummary[] = [];
    const rejected: PlanResult['rejected'] = [];
    let replyText = modelPlan.reply;
    let finished: Promise<Synthesis>;
    // Each task is its own commit (through the pool's admission), so until every one is written and
    // released a failure or a crash leaves some held; they are cancelled, at once or by a later goal.
    try {
      for (const [index, task] of planned.entries()) {
        const agentId = task.agent ?? request.agentId;
        // What the worker is told, and so what a retry answered from the queue reports.
        const description = task.description || task.title;
        try {
          const { id } = await submitTask({
            kind: taskKind,
            agentId,
            title: task.title,
            description,
            params: { planId, index, total, goal, ...answer },
            sessionKey: request.sessionKey,
            source: 'planner',
            // Held until the plan is announced, so delegation events always precede the workers' own.
            paused: true,
          });
          holding.add(id);
          tracked.set(id, { index, title: task.title });
          tasks.push({ workItemId: id, title: task.title, description, agentId });
        } catch (error) {
          if (!AgentdError.isInstance(error) || error.code !== ErrorCodes.queueFull) throw error;
          rejected.push({ title: task.title, code: error.code, message: error.message });
        }
      }

      // Announced only once all are written: a plan that fails while writing them was never announced.
      for (const task of tasks) publishStatus(task.workItemId, 'queued');
      replyText = replyWithRefusals(modelPlan.reply, rejected.length);
      bus.publish('agent:plan', { planId, goal, reply: replyText, tasks, ...scope }, scope);
      for (const task of tasks) {
        bus.publish(
          'agent:progress',
          {
            phase: 'delegated',
            message: `delegated "${task.title}" to ${task.agentId}`,
            planId,
            workItemId: task.workItemId,
            ...scope,
          },
          scope,
        );
      }
      finished = follow(planId, request, tasks, unsubscribe, tracked);
      finished.finally(() => finishHooks.delete(planId)).catch(() => undefined);
      bus.publish(
        'agent:progress',
        { phase: 'planner-ready', message: `${tasks.length} task(s) delegated`, planId, ...scope },
        scope,
      );
      for (const task of tasks) {
        holding.delete(task.workItemId);
        resumedHeld.add(task.workItemId);
        await queue.resume(task.workItemId);
      }
    } catch (error) {
      unsubscribe();
      finishHooks.delete(planId);
      if (tasks.length > 0) {
        // Released ones too: the caller hears that the goal failed, and a goal tried again must not run twice.
        abandoned.set(
          planId,
          tasks.map((task) => task.workItemId),
        );
        await cancelOrphans().catch((cancelError: unknown) =>
          logger.warn(
            { err: cancelError, planId },
            'could not cancel the tasks of a failed plan; the next goal cancels them',
          ),
        );
      }
      throw error;
    }

    // The most recent sessions' plans: a caller choosing new session keys must not grow this for good.
    latestPlans.delete(request.sessionKey);
    if (latestPlans.size >= maxRememberedPlans) latestPlans.delete(latestPlans.keys().next().value!);
    latestPlans.set(request.sessionKey, {
      planId,
      goal,
      reply: replyText,
      taskIds: tasks.map((task) => task.workItemId),
    });
    if (options.memoryWriter) {
      const lines = tasks.map(
        (task, index) => `${index + 1}. ${task.title} — ${task.description} [${task.workItemId}]`,
      );
      // Context for the session's later turns, not a record anything depends on (the queue holds the
      // tasks): while memory is degraded it may only be kept in RAM, and a refused write is logged, not
      // turned into a failed goal whose tasks already run.
      await options
        .memoryWriter({
          ...scope,
          role: 'system',
          content: [`Primary Brain plan for goal: ${goal}`, ...lines].join('\n'),
        })
        .catch((error: unknown) => logger.warn({ err: error, planId }, 'could not write the plan to memory'));
    }
    return { planId, reply: replyText, tasks, rejected, finished };
  };

  return {
    async plan(request) {
      const goal = request.goal.trim();
      if (!goal) throw new UserInputError({ code: ErrorCodes.invalidRequest, message: 'the goal is empty.' });
      const key = request.idempotencyKey;
      if (key === undefined) return planGoal(request, goal);
      const slot = JSON.stringify([request.sessionKey, key]);
      const known = keyedAnswered.get(slot) ?? keyedInFlight.get(slot);
      if (known) {
        if (known.goal !== goal) throw keyUsedForAnotherGoal(key);
        return known.result.then(replayOf);
      }
      const keyed = { goal, result: answerKeyed(request, key, goal) };
      keyedInFlight.set(slot, keyed);
      try {
        await keyed.result;
        // A failure is not kept: its tasks were cancelled, so the goal sent again is planned afresh.
        if (keyedAnswered.size >= maxRememberedKeys) keyedAnswered.delete(keyedAnswered.keys().next().value!);
        keyedAnswered.set(slot, keyed);
      } finally {
        keyedInFlight.delete(slot);
      }
      return keyed.result;
    },
    async latest(sessionKey) {
      const plan = latestPlans.get(sessionKey);
      if (!plan) return undefined;
      const items = await queue.getMany(plan.taskIds);
      return {
        planId: plan.planId,
        goal: plan.goal,
        reply: plan.reply,
        tasks: items.map((item) => ({ workItemId: item.id, title: item.title, state: item.state })),
      };
    },
  };
}
