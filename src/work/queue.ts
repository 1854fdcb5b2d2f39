import type { z } from 'zod';
import type { Bus, BusEventMap } from '../bus/index.js';
import type { SqlDatabase, SqlExecutor, SqlValue } from '../store/index.js';
import { type Clock, systemClock } from '../util/clock.js';
import { ErrorCodes, UserInputError } from '../util/errors.js';
import { createIdGenerator, type IdGenerator } from '../util/ids.js';
import { type Logger, silentLogger } from '../util/logger.js';
import { formatZodIssues } from '../util/safe-json.js';
import { type WorkConfig, workConfigSchema } from './config.js';
import type { WorkErrorPayload, WorkEventBase } from './events.js';
import { createPostgresNotifier, type WorkNotifier } from './notifier.js';
import { outcomeSummary, rowToWorkItem, type WorkItemRow } from './rows.js';
import {
  canTransition,
  isTerminalWorkState,
  liveWorkStates,
  statesThatCanEnter,
  WorkErrorCodes,
  type WorkState,
  workStates,
} from './states.js';
import {
  type ClaimFilter,
  type SubmitResult,
  type WorkItem,
  type WorkListFilter,
  type WorkSubmission,
  workSubmissionSchema,
} from './types.js';

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
  /** Increases on every local or remote wake-up; pass it to `waitForWork` to avoid a lost wake-up. */
  readonly wakeSequence: number;
  /**
   * Resolves when work may be ready: a submission or re-queue here or in another process (LISTEN/NOTIFY),
   * the next backoff or lease deadline, or at the latest after `pollIntervalMs`. Never spins.
   */
  /** `filter`: only items that this claim filter would take count as work that is due. */
  waitForWork(
    signal?: AbortSignal,
    options?: { sinceSequence?: number; filter?: ClaimFilter },
  ): Promise<void>;
  /** Resolves once cross-process wake-ups are active (at once when there is no LISTEN connection). */
  whenListening(): Promise<void>;
  close(): Promise<void>;
}

/** What a worker reports with a completion; `durationMs` defaults to the time since the item started. */
export interface WorkCompletion {
  data?: unknown;
  durationMs?: number;
}

const leasedStates: ReadonlyArray<WorkState> = ['claimed', 'running'];

/**
 * `state IN (states)` written as its complement. A guarded statement on one item must find the row by its
 * primary key; given `state IN ('claimed', 'running')` the planner may scan the partial index of leased
 * (or queued) items instead whenever its statistics undercount them, and each completion then costs
 * O(leased items): 12.6 ms instead of 0.1 ms with 3,000 items running in a fresh table. No partial index
 * predicate follows from the complement, so only the primary key can serve the statement.
 */
function stateGuard(states: ReadonlyArray<WorkState>): { sql: string; params: WorkState[] } {
  const others = workStates.filter((state) => !states.includes(state));
  return { sql: `state NOT IN (${inList(others)})`, params: others };
}

/** A Postgres array literal (`{"a","b"}`, NULL for null), so a list travels as one parameter. */
function pgArray(values: ReadonlyArray<string | null>): string {
  const elements = values.map((value) =>
    value === null ? 'NULL' : `"${value.replace(/[\\"]/g, (char) => `\\${char}`)}"`,
  );
  return `{${elements.join(',')}}`;
}

function inList(values: ReadonlyArray<unknown>): string {
  return values.map(() => '?').join(', ');
}

function leaseExpired(id: string, detail: string): UserInputError {
  return new UserInputError({
    code: WorkErrorCodes.leaseExpired,
    message: `the lease on work item ${id} is no longer held by this worker (${detail}); the result was not recorded.`,
    details: { workItemId: id },
  });
}

function notFound(id: string): UserInputError {
  return new UserInputError({
    code: ErrorCodes.notFound,
    message: `work item ${id} does not exist.`,
    details: { workItemId: id },
  });
}

type Effect = () => void;

/** Creates the durable work queue over a migrated database (migration 0004). */
export function createWorkQueue(options: CreateWorkQueueOptions): WorkQueue {
  const { db } = options;
  const bus = options.bus;
  const clock = options.clock ?? systemClock;
  const idGenerator = options.idGenerator ?? createIdGenerator({ now: () => clock.now() });
  const logger = (options.logger ?? silentLogger).child({ component: 'work' });
  const config = workConfigSchema.parse({ ...options.config, awareness: undefined });
  const channel = options.notifyChannel ?? 'agentd_work';
  const instanceId = idGenerator('queue');
  const isPostgres = db.dialect === 'postgres';
  const skipLocked = isPostgres ? ' FOR UPDATE SKIP LOCKED' : '';

  let wakeSequence = 0;
  const waiters = new Set<() => void>();
  let closed = false;
  let lastReapAt = Number.NEGATIVE_INFINITY;

  const wake = () => {
    wakeSequence++;
    const pending = [...waiters];
    waiters.clear();
    for (const resolve of pending) resolve();
  };

  const base = (item: WorkItem, remote?: boolean): WorkEventBase => ({
    workItemId: item.id,
    kind: item.kind,
    state: item.state,
    agentId: item.agentId,
    parentId: item.parentId,
    ...(remote ? { remote: true } : {}),
  });

  const publish = <K extends keyof BusEventMap & `work:${string}`>(
    type: K,
    item: WorkItem,
    data: BusEventMap[K],
  ) => {
    bus?.publish(type, data, {
      workItemId: item.id,
      ...(item.agentId ? { agentId: item.agentId } : {}),
      ...(item.sessionKey ? { sessionKey: item.sessionKey } : {}),
    });
  };

  const publishTerminal = (item: WorkItem, remote?: boolean) => {
    const error = item.outcome?.error ?? { code: 'UNKNOWN', message: 'no error recorded', retryable: false };
    switch (item.state) {
      case 'completed': {
        const summary = outcomeSummary(item);
        publish('work:completed', item, {
          ...base(item, remote),
          durationMs: item.outcome?.durationMs ?? 0,
          ...(summary !== undefined ? { summary } : {}),
        });
        break;
      }
      case 'failed':
        publish('work:failed', item, {
          ...base(item, remote),
          error,
          attempt: item.attempts,
          willRetry: false,
        });
        break;
      case 'dead':
        publish('work:dead', item, { ...base(item, remote), error, attempt: item.attempts });
        break;
      case 'cancelled':
        publish('work:cancelled', item, {
          ...base(item, remote),
          ...(item.stateReason ? { reason: item.stateReason } : {}),
        });
        break;
      default:
        break;
    }
  };

  const notifier: WorkNotifier | undefined =
    isPostgres && options.listenConnectionString
      ? createPostgresNotifier({
          connectionString: options.listenConnectionString,
          channel,
          instanceId,
          logger,
          onWake: wake,
          onTerminal: (id) => {
            void get(id).then(
              (item) => {
                if (item && isTerminalWorkState(item.state)) publishTerminal(item, true);
              },
              (error) =>
                logger.warn({ err: error, workItemId: id }, 'could not load a remotely finished work item'),
            );
          },
        })
      : undefined;

  /** NOTIFY inside the transaction: Postgres delivers it at commit, and never for a rolled-back change. */
  const notify = async (tx: SqlExecutor, message: { t: 'wake' } | { t: 'terminal'; id: string }) => {
    if (!isPostgres) return;
    await tx.run('SELECT pg_notify(?, ?)', [channel, JSON.stringify({ o: instanceId, ...message })]);
  };

  /**
   * Every move back to `queued` must reach idle workers: other processes through NOTIFY at commit, this
   * one through `wake()` after commit, right after the event that announces the move.
   */
  const wakeWorkersAfterCommit = async (tx: SqlExecutor, effects: Effect[], announce: () => void) => {
    await notify(tx, { t: 'wake' });
    effects.push(() => {
      announce();
      wake();
    });
  };

  const selectById = async (exec: SqlExecutor, id: string, lock = false): Promise<WorkItem | undefined> => {
    const row = await exec.get<WorkItemRow>(
      `SELECT * FROM work_items WHERE id = ?${lock && isPostgres ? ' FOR UPDATE' : ''}`,
      [id],
    );
    return row ? rowToWorkItem(row) : undefined;
  };

  const get = (id: string) => selectById(db, id);

  /** Why a guarded UPDATE matched no row, read from the item as it is now. */
  const refusal = (
    id: string,
    current: WorkItem | undefined,
    to: WorkState,
    from: ReadonlyArray<WorkState>,
    leaseOwner: string | undefined,
  ): UserInputError => {
    if (!current) return notFound(id);
    if (leaseOwner !== undefined && from.includes(current.state)) {
      return leaseExpired(
        id,
        current.leaseOwner === leaseOwner
          ? 'the lease expired'
          : `it is held by ${current.leaseOwner ?? 'nobody'}`,
      );
    }
    if (leaseOwner !== undefined && current.state === 'queued') {
      return leaseExpired(id, 'the item was re-queued after its lease expired');
    }
    return new UserInputError({
      code: WorkErrorCodes.invalidTransition,
      message: `work item ${id} cannot go from ${current.state} to ${to}${canTransition(current.state, to) ? ' here' : ''}.`,
      details: { workItemId: id, from: current.state, to },
    });
  };

  /**
   * One checked transition as a single guarded UPDATE, so two processes racing on an item cannot both
   * win. On a miss the item is read back to say precisely why (unknown id, lost lease, illegal move).
   */
  const transition = async (
    exec: SqlExecutor,
    id: string,
    to: WorkState,
    sets: Record<string, SqlValue>,
    guard: { from?: ReadonlyArray<WorkState>; leaseOwner?: string; now: number },
  ): Promise<WorkItem> => {
    const from = guard.from ?? statesThatCanEnter(to);
    const assignments = [
      'state = ?',
      'updated_at = ?',
      ...Object.keys(sets).map((column) => `${column} = ?`),
    ];
    const states = stateGuard(from);
    const params: SqlValue[] = [to, guard.now, ...Object.values(sets), id, ...states.params];
    let where = `id = ? AND ${states.sql}`;
    if (guard.leaseOwner !== undefined) {
      where += ' AND lease_owner = ? AND lease_expires_at > ?';
      params.push(guard.leaseOwner, guard.now);
    }
    const row = await exec.get<WorkItemRow>(
      `UPDATE work_items SET ${assignments.join(', ')} WHERE ${where} RETURNING *`,
      params,
    );
    if (row) return rowToWorkItem(row);
    throw refusal(id, await selectById(exec, id), to, from, guard.leaseOwner);
  };

  /** When a child ends, its blocked parent whose awaited children have all ended goes back to the queue. */
  const maybeUnblockParent = async (
    tx: SqlExecutor,
    parentId: string,
    now: number,
    effects: Effect[],
  ): Promise<boolean> => {
    const parent = await selectById(tx, parentId, true);
    if (parent?.state !== 'blocked' || !parent.waitingOn || parent.waitingOn.length === 0) return false;
    const children = await tx.all<{ id: string; state: string }>(
      `SELECT id, state FROM work_items WHERE id IN (${inList(parent.waitingOn)})`,
      parent.waitingOn,
    );
    const allEnded =
      children.length === parent.waitingOn.length &&
      children.every((child) => isTerminalWorkState(child.state as WorkState));
    if (!allEnded) return false;
    const requeued = await transition(
      tx,
      parent.id,
      'queued',
      { run_after: now, state_reason: 'children finished' },
      { now, from: ['blocked'] },
    );
    await wakeWorkersAfterCommit(tx, effects, () => publish('work:unblocked', requeued, base(requeued)));
    return true;
  };

  const afterTerminal = async (tx: SqlExecutor, item: WorkItem, now: number, effects: Effect[]) => {
    await notify(tx, { t: 'terminal', id: item.id });
    effects.push(() => publishTerminal(item));
    if (item.parentId) await maybeUnblockParent(tx, item.parentId, now, effects);
  };

  /** Runs `work` in a transaction and fires the collected bus events only after it committed. */
  const withEffects = async <T>(work: (tx: SqlExecutor, effects: Effect[]) => Promise<T>): Promise<T> => {
    const effects: Effect[] = [];
    const result = await db.transaction((tx) => work(tx, effects));
    for (const effect of effects) effect();
    return result;
  };

  const backoffMs = (attempt: number) =>
    Math.min(config.backoffMaxMs, config.backoffBaseMs * 2 ** Math.max(0, attempt - 1));

  const insertColumns = [
    'id',
    'kind',
    'agent_id',
    'title',
    'description',
    'params',
    'priority',
    'state',
    'dedup_key',
    'merged_into',
    'parent_id',
    'depth',
    'attempts',
    'max_attempts',
    'run_after',
    'speculative',
    'rationale',
    'session_key',
    'source',
    'created_at',
    'updated_at',
    'resolved_at',
  ];
  const insertSql = `INSERT INTO work_items (${insertColumns.join(', ')}) VALUES (${inList(insertColumns)})`;

  type ParsedSubmission = z.output<typeof workSubmissionSchema>;

  const rowValues = (
    input: ParsedSubmission,
    row: {
      id: string;
      state: WorkState;
      dedupKey: string | null;
      mergedInto: string | null;
      depth: number;
      priority: number;
      sessionKey: string | null;
    },
    now: number,
  ): SqlValue[] => [
    row.id,
    input.kind,
    input.agentId ?? null,
    input.title ?? (input.description.split('\n')[0]?.slice(0, 120) || input.kind),
    input.description,
    JSON.stringify(input.params),
    row.priority,
    row.state,
    row.dedupKey,
    row.mergedInto,
    input.parentId ?? null,
    row.depth,
    0,
    input.maxAttempts ?? config.maxAttempts,
    now + (input.delayMs ?? 0),
    input.speculative ? 1 : 0,
    input.rationale ?? null,
    row.sessionKey,
    input.source ?? null,
    now,
    now,
    row.state === 'merged' ? now : null,
  ];

  /** Child work and dedup read other rows first, so they run in a transaction. */
  const submitChecked = (input: ParsedSubmission, now: number) =>
    withEffects(async (tx, effects): Promise<SubmitResult> => {
      let depth = 0;
      let priority = input.priority ?? 0;
      let sessionKey = input.sessionKey ?? null;
      if (input.parentId) {
        const parent = await selectById(tx, input.parentId);
        if (!parent) throw notFound(input.parentId);
        if (isTerminalWorkState(parent.state)) {
          throw new UserInputError({
            code: ErrorCodes.invalidRequest,
            message: `work item ${parent.id} is ${parent.state}; it cannot get new child work.`,
          });
        }
        depth = parent.depth + 1;
        if (depth > config.maxDepth) {
          throw new UserInputError({
            code: WorkErrorCodes.depthLimit,
            message: `child work would be at depth ${depth}; the limit is ${config.maxDepth}. Do the work here instead of delegating it.`,
            details: { depth, maxDepth: config.maxDepth },
          });
        }
        const siblings = await tx.get<{ n: number }>(
          "SELECT COUNT(*) AS n FROM work_items WHERE parent_id = ? AND state <> 'merged'",
          [parent.id],
        );
        if (Number(siblings?.n ?? 0) >= config.maxChildren) {
          throw new UserInputError({
            code: WorkErrorCodes.fanOutLimit,
            message: `work item ${parent.id} already has ${siblings?.n} children; the limit is ${config.maxChildren}.`,
            details: { maxChildren: config.maxChildren },
          });
        }
        priority = input.priority ?? parent.priority;
        sessionKey = input.sessionKey ?? parent.sessionKey;
      }
      const id = idGenerator('work');
      const state: WorkState = input.paused ? 'paused' : 'queued';
      const fields = {
        id,
        state,
        dedupKey: input.dedupKey ?? null,
        mergedInto: null,
        depth,
        priority,
        sessionKey,
      };
      const inserted = await tx.get<WorkItemRow>(
        `${insertSql}${input.dedupKey !== undefined ? ' ON CONFLICT DO NOTHING' : ''} RETURNING *`,
        rowValues(input, fields, now),
      );
      if (!inserted) {
        const live = await tx.get<WorkItemRow>(
          `SELECT * FROM work_items WHERE kind = ? AND dedup_key = ? AND state IN (${inList(liveWorkStates)})`,
          [input.kind, input.dedupKey!, ...liveWorkStates],
        );
        if (!live)
          throw new UserInputError({
            code: ErrorCodes.conflict,
            message: `work item id ${id} already exists.`,
          });
        await tx.run(
          insertSql,
          rowValues(input, { ...fields, state: 'merged', dedupKey: null, mergedInto: live.id }, now),
        );
        const liveItem = rowToWorkItem(live);
        effects.push(() =>
          publish('work:merged', liveItem, {
            ...base(liveItem),
            mergedRecordId: id,
            dedupKey: input.dedupKey!,
          }),
        );
        return { id: live.id, merged: true, mergedRecordId: id };
      }
      const item = rowToWorkItem(inserted);
      if (state === 'queued') await notify(tx, { t: 'wake' });
      effects.push(() => announceSubmitted(item));
      return { id, merged: false };
    });

  const submit = async (submission: WorkSubmission): Promise<SubmitResult> => {
    const parsed = workSubmissionSchema.safeParse(submission);
    if (!parsed.success) {
      throw new UserInputError({
        code: ErrorCodes.invalidRequest,
        message: `invalid work submission: ${formatZodIssues(parsed.error.issues)}`,
      });
    }
    const input = parsed.data;
    const now = clock.now();
    if (input.parentId || input.dedupKey !== undefined) return submitChecked(input, now);
    // Nothing to check against other rows: one statement (with its NOTIFY on Postgres), no transaction.
    const id = idGenerator('work');
    const state: WorkState = input.paused ? 'paused' : 'queued';
    const values = rowValues(
      input,
      {
        id,
        state,
        dedupKey: null,
        mergedInto: null,
        depth: 0,
        priority: input.priority ?? 0,
        sessionKey: input.sessionKey ?? null,
      },
      now,
    );
    const row =
      isPostgres && state === 'queued'
        ? await db.get<WorkItemRow>(
            `WITH inserted AS (${insertSql} RETURNING *) SELECT inserted.*, pg_notify(?, ?) AS notified FROM inserted`,
            [...values, channel, JSON.stringify({ o: instanceId, t: 'wake' })],
          )
        : await db.get<WorkItemRow>(`${insertSql} RETURNING *`, values);
    announceSubmitted(rowToWorkItem(row!));
    return { id, merged: false };
  };

  const announceSubmitted = (item: WorkItem) => {
    publish('work:submitted', item, {
      ...base(item),
      title: item.title,
      priority: item.priority,
      speculative: item.speculative,
      sessionKey: item.sessionKey,
    });
    if (item.state === 'queued') wake();
  };

  const claimFilterSql = (filter: ClaimFilter | undefined): { sql: string; params: SqlValue[] } => {
    let sql = '';
    const params: SqlValue[] = [];
    if (filter?.kinds && filter.kinds.length > 0) {
      sql += ` AND kind IN (${inList(filter.kinds)})`;
      params.push(...filter.kinds);
    }
    if (filter?.excludeKinds && filter.excludeKinds.length > 0) {
      sql += ` AND kind NOT IN (${inList(filter.excludeKinds)})`;
      params.push(...filter.excludeKinds);
    }
    if (filter?.agentIds && filter.agentIds.length > 0) {
      sql += ` AND agent_id IN (${inList(filter.agentIds)})`;
      params.push(...filter.agentIds);
    }
    return { sql, params };
  };

  const claimOnce = async (
    workerId: string,
    limit: number,
    filter: ClaimFilter | undefined,
  ): Promise<WorkItem[]> => {
    const now = clock.now();
    const leaseMs = filter?.leaseMs ?? config.leaseMs;
    let rows: WorkItemRow[];
    if (isPostgres) {
      // migrations/postgres/0007_work_perf.sql: the same statement as below, with its plan pinned.
      const list = (values: ReadonlyArray<string> | undefined) =>
        values && values.length > 0 ? pgArray(values) : null;
      rows = await db.all<WorkItemRow>(
        'SELECT * FROM work_claim(?::bigint, ?::integer, ?::text, ?::bigint, ?::boolean, ?::text[], ?::text[], ?::text[])',
        [
          now,
          limit,
          workerId,
          leaseMs,
          filter?.start === true,
          list(filter?.kinds),
          list(filter?.excludeKinds),
          list(filter?.agentIds),
        ],
      );
    } else {
      // One statement: SQLite's single writer makes it atomic, in this process and across processes, so the
      // rows the subquery picks are still queued when they are updated. INDEXED BY for the reason the
      // Postgres function pins its plan: without statistics SQLite sorts every queued row on each claim
      // (1.2 ms instead of 0.23 ms per claim of 8 with 3,000 queued).
      const extra = claimFilterSql(filter);
      const assignments = `state = '${filter?.start ? 'running' : 'claimed'}', lease_owner = ?, lease_expires_at = ?, attempts = attempts + 1, updated_at = ?, state_reason = NULL${filter?.start ? ', started_at = ?' : ''}`;
      const setParams: SqlValue[] = [workerId, now + leaseMs, now, ...(filter?.start ? [now] : [])];
      rows = await db.all<WorkItemRow>(
        `UPDATE work_items SET ${assignments} WHERE id IN (SELECT id FROM work_items INDEXED BY work_items_ready WHERE state = 'queued' AND run_after <= ?${extra.sql} ORDER BY priority DESC, created_at, id LIMIT ?) RETURNING *`,
        [...setParams, now, ...extra.params, limit],
      );
    }
    const items = rows
      .map(rowToWorkItem)
      .sort((left, right) => right.priority - left.priority || left.createdAt - right.createdAt);
    for (const item of items) {
      publish('work:claimed', item, {
        ...base(item),
        state: 'claimed',
        workerId,
        attempt: item.attempts,
        leaseExpiresAt: item.leaseExpiresAt ?? now + leaseMs,
      });
      if (filter?.start) publish('work:started', item, { ...base(item), workerId, attempt: item.attempts });
    }
    return items;
  };

  const claimBatch = async (workerId: string, limit: number, filter?: ClaimFilter): Promise<WorkItem[]> => {
    if (closed) return [];
    const items = await claimOnce(workerId, limit, filter);
    if (items.length > 0) return items;
    // Nothing ready: a lapsed lease may be hiding work. Reaping is cheap but not free, so at most once a second.
    if (clock.now() - lastReapAt < 1_000) return items;
    const reaped = await reapExpiredLeases();
    if (reaped.requeued.length === 0 && reaped.unblocked.length === 0) return items;
    return claimOnce(workerId, limit, filter);
  };

  // The statement assembles the outcome, `{"data":…,"durationMs":…}` as JSON.stringify writes it, from JSON
  // texts made in JavaScript; a completion without `durationMs` takes the time since `started_at` from the
  // row itself, so no completion reads the row first.
  const completeSets = `state = 'completed', updated_at = ?, resolved_at = ?, lease_owner = NULL, lease_expires_at = NULL, waiting_on = NULL, state_reason = NULL, outcome = '{' || COALESCE('"data":' || done_input.data || ',', '') || '"durationMs":' || COALESCE(done_input.duration_ms, CAST(CAST(? AS BIGINT) - started_at AS TEXT), '0') || '}'`;
  const leased = stateGuard(leasedStates);
  const completeGuard = `${leased.sql} AND lease_owner = ? AND lease_expires_at > ?`;
  // The batch travels as arrays (Postgres) or one JSON array (SQLite): one statement text for any batch size.
  // On Postgres an item's end is announced only when another process may wait for it (child work, session
  // tasks): NOTIFY serialises commits, and fire-and-forget jobs should not pay for that.
  const completeSql = isPostgres
    ? `WITH done AS (
         UPDATE work_items SET ${completeSets}
         FROM unnest(?::text[], ?::text[], ?::text[]) AS done_input (id, data, duration_ms)
         WHERE work_items.id = done_input.id AND ${completeGuard}
         RETURNING work_items.*)
       SELECT done.*, CASE WHEN done.parent_id IS NOT NULL OR done.session_key IS NOT NULL
         THEN pg_notify(?, json_build_object('o', ?::text, 't', 'terminal', 'id', done.id)::text) END AS notified
       FROM done`
    : `UPDATE work_items SET ${completeSets}
       FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS data,
                    json_extract(value, '$[2]') AS duration_ms FROM json_each(?)) AS done_input
       WHERE work_items.id = done_input.id AND ${completeGuard}
       RETURNING *`;

  const completeMany = async (
    workerId: string,
    completions: ReadonlyArray<WorkCompletion & { id: string }>,
  ): Promise<Array<PromiseSettledResult<WorkItem>>> => {
    if (completions.length === 0) return [];
    const now = clock.now();
    const entries = new Map<string, { data: string | null; durationMs: string | null }>();
    // Data that cannot be serialised (a cycle, a BigInt) refuses that completion only, not its batch.
    const unserialisable = new Map<string, unknown>();
    for (const completion of completions) {
      if (entries.has(completion.id) || unserialisable.has(completion.id)) continue;
      try {
        entries.set(completion.id, {
          data: completion.data === undefined ? null : (JSON.stringify(completion.data) ?? null),
          durationMs:
            typeof completion.durationMs === 'number' && Number.isFinite(completion.durationMs)
              ? JSON.stringify(completion.durationMs)
              : null,
        });
      } catch (error) {
        unserialisable.set(completion.id, error);
      }
    }
    const ids = [...entries.keys()];
    const batch = isPostgres
      ? [
          pgArray(ids),
          pgArray(ids.map((id) => entries.get(id)!.data)),
          pgArray(ids.map((id) => entries.get(id)!.durationMs)),
        ]
      : [JSON.stringify(ids.map((id) => [id, entries.get(id)!.data, entries.get(id)!.durationMs]))];
    const rows =
      ids.length === 0
        ? []
        : await db.all<WorkItemRow>(completeSql, [
            now,
            now,
            now,
            ...batch,
            ...leased.params,
            workerId,
            now,
            ...(isPostgres ? [channel, instanceId] : []),
          ]);
    const done = new Map(rows.map((row) => [row.id, rowToWorkItem(row)]));
    const missed = ids.filter((id) => !done.has(id));
    // The statement touched only rows whose guard held; the others are read back to say why.
    const current = new Map((await getMany(missed)).map((item) => [item.id, item]));
    const reported = new Set<string>();
    const results = completions.map((completion): PromiseSettledResult<WorkItem> => {
      const item = done.get(completion.id);
      if (item && !reported.has(completion.id)) {
        reported.add(completion.id);
        return { status: 'fulfilled', value: item };
      }
      if (!item && unserialisable.has(completion.id))
        return { status: 'rejected', reason: unserialisable.get(completion.id) };
      return {
        status: 'rejected',
        reason: refusal(
          completion.id,
          item ?? current.get(completion.id),
          'completed',
          leasedStates,
          workerId,
        ),
      };
    });
    for (const item of done.values()) publishTerminal(item);
    for (const item of done.values()) {
      // A crash right here leaves the parent blocked; reapExpiredLeases repairs that.
      if (item.parentId)
        await withEffects((tx, effects) => maybeUnblockParent(tx, item.parentId!, now, effects));
    }
    return results;
  };

  const reapExpiredLeases = async () => {
    const now = clock.now();
    lastReapAt = now;
    const result = {
      requeued: [] as string[],
      dead: [] as string[],
      blocked: [] as string[],
      unblocked: [] as string[],
    };
    await withEffects(async (tx, effects) => {
      const expired = await tx.all<WorkItemRow>(
        `SELECT * FROM work_items WHERE state IN ('claimed', 'running') AND lease_expires_at <= ? ORDER BY lease_expires_at LIMIT 500${skipLocked}`,
        [now],
      );
      for (const row of expired.map(rowToWorkItem)) {
        const stillExpired = { now, from: [row.state] };
        const cleared = { lease_owner: null, lease_expires_at: null };
        try {
          if (row.state === 'running' && row.waitingOn && row.waitingOn.length > 0) {
            const blocked = await transition(
              tx,
              row.id,
              'blocked',
              { ...cleared, state_reason: 'lease expired while awaiting child work' },
              stillExpired,
            );
            result.blocked.push(row.id);
            effects.push(() =>
              publish('work:blocked', blocked, {
                ...base(blocked),
                reason: blocked.stateReason ?? '',
                waitingOn: row.waitingOn ?? [],
              }),
            );
            if (await maybeUnblockParent(tx, row.id, now, effects)) result.unblocked.push(row.id);
          } else if (row.attempts >= row.maxAttempts) {
            const error = {
              code: WorkErrorCodes.leaseExpired,
              message: `the worker's lease expired on attempt ${row.attempts} of ${row.maxAttempts}`,
              retryable: false,
            };
            const dead = await transition(
              tx,
              row.id,
              'dead',
              {
                ...cleared,
                state_reason: 'lease expired; attempts used up',
                outcome: JSON.stringify({ error }),
                resolved_at: now,
              },
              stillExpired,
            );
            result.dead.push(row.id);
            await afterTerminal(tx, dead, now, effects);
          } else {
            const requeued = await transition(
              tx,
              row.id,
              'queued',
              { ...cleared, run_after: now, state_reason: 'lease expired' },
              stillExpired,
            );
            result.requeued.push(row.id);
            await wakeWorkersAfterCommit(tx, effects, () =>
              publish('work:requeued', requeued, { ...base(requeued), reason: 'lease-expired' }),
            );
          }
        } catch (error) {
          // Another process reaped or finished it in the meantime; nothing to do for this row.
          logger.debug({ err: error, workItemId: row.id }, 'lease reap skipped an item');
        }
      }
      // A crash between a child's end and its parent's re-queue leaves the parent blocked: repair it here.
      const blockedParents = await tx.all<{ id: string }>(
        "SELECT id FROM work_items WHERE state = 'blocked' AND waiting_on IS NOT NULL LIMIT 500",
      );
      for (const parent of blockedParents) {
        if (result.unblocked.includes(parent.id)) continue;
        if (await maybeUnblockParent(tx, parent.id, now, effects)) result.unblocked.push(parent.id);
      }
    });
    return result;
  };

  const counts = async (filter: Pick<WorkListFilter, 'sessionKey' | 'agentId' | 'kind'> = {}) => {
    const clauses: string[] = [];
    const params: SqlValue[] = [];
    if (filter.sessionKey !== undefined) {
      clauses.push('session_key = ?');
      params.push(filter.sessionKey);
    }
    if (filter.agentId !== undefined) {
      clauses.push('agent_id = ?');
      params.push(filter.agentId);
    }
    if (filter.kind !== undefined) {
      clauses.push('kind = ?');
      params.push(filter.kind);
    }
    const rows = await db.all<{ state: string; n: number }>(
      `SELECT state, COUNT(*) AS n FROM work_items${clauses.length ? ` WHERE ${clauses.join(' AND ')}` : ''} GROUP BY state`,
      params,
    );
    const result = Object.fromEntries(workStates.map((state) => [state, 0])) as Record<WorkState, number>;
    for (const row of rows) result[row.state as WorkState] = Number(row.n);
    return result;
  };

  const list = async (filter: WorkListFilter = {}): Promise<WorkItem[]> => {
    const clauses: string[] = [];
    const params: SqlValue[] = [];
    const add = (clause: string, ...values: SqlValue[]) => {
      clauses.push(clause);
      params.push(...values);
    };
    if (filter.states && filter.states.length > 0)
      add(`state IN (${inList(filter.states)})`, ...filter.states);
    if (filter.kind !== undefined) add('kind = ?', filter.kind);
    if (filter.kinds)
      add(filter.kinds.length ? `kind IN (${inList(filter.kinds)})` : '1 = 0', ...filter.kinds);
    if (filter.excludeKinds?.length)
      add(`kind NOT IN (${inList(filter.excludeKinds)})`, ...filter.excludeKinds);
    if (filter.agentId !== undefined) add('agent_id = ?', filter.agentId);
    if (filter.sessionKey !== undefined) add('session_key = ?', filter.sessionKey);
    if (filter.parentId !== undefined) add('parent_id = ?', filter.parentId);
    if (filter.speculative !== undefined) add('speculative = ?', filter.speculative ? 1 : 0);
    if (filter.resolvedSince !== undefined) add('resolved_at >= ?', filter.resolvedSince);
    if (filter.updatedBefore !== undefined) add('updated_at < ?', filter.updatedBefore);
    const order =
      filter.order === 'oldest'
        ? 'created_at ASC, id ASC'
        : filter.order === 'recently-resolved'
          ? 'resolved_at DESC, id DESC'
          : 'created_at DESC, id DESC';
    const limit = Math.min(Math.max(filter.limit ?? 100, 1), 10_000);
    const rows = await db.all<WorkItemRow>(
      `SELECT * FROM work_items${clauses.length ? ` WHERE ${clauses.join(' AND ')}` : ''} ORDER BY ${order} LIMIT ?`,
      [...params, limit],
    );
    return rows.map(rowToWorkItem);
  };

  const getMany = async (ids: ReadonlyArray<string>): Promise<WorkItem[]> => {
    if (ids.length === 0) return [];
    const rows = await db.all<WorkItemRow>(`SELECT * FROM work_items WHERE id IN (${inList(ids)})`, [...ids]);
    const byId = new Map(rows.map((row) => [row.id, rowToWorkItem(row)]));
    return ids.flatMap((id) => byId.get(id) ?? []);
  };

  const cancel = (id: string, cancelOptions: { reason?: string; cascade?: boolean } = {}) =>
    withEffects(async (tx, effects) => {
      const now = clock.now();
      const cancelOne = async (itemId: string) => {
        const item = await transition(
          tx,
          itemId,
          'cancelled',
          {
            state_reason: cancelOptions.reason ?? 'cancelled',
            lease_owner: null,
            lease_expires_at: null,
            resolved_at: now,
          },
          { now },
        );
        await afterTerminal(tx, item, now, effects);
        return item;
      };
      const cancelled = await cancelOne(id);
      if (cancelOptions.cascade !== false) {
        let frontier = [id];
        while (frontier.length > 0) {
          const children = await tx.all<{ id: string; state: string }>(
            `SELECT id, state FROM work_items WHERE parent_id IN (${inList(frontier)})`,
            frontier,
          );
          for (const child of children) {
            if (!isTerminalWorkState(child.state as WorkState)) await cancelOne(child.id);
          }
          frontier = children.map((child) => child.id);
        }
      }
      return cancelled;
    });

  const waitForWork = async (
    signal?: AbortSignal,
    waitOptions: { sinceSequence?: number; filter?: ClaimFilter } = {},
  ) => {
    if (closed || signal?.aborted) return;
    if (waitOptions.sinceSequence !== undefined && waitOptions.sinceSequence !== wakeSequence) return;
    // Only items the caller may claim count as due: a worker for other kinds must sleep, not spin.
    const claimable = claimFilterSql(waitOptions.filter);
    await new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const stopWaiting = () => {
        clearTimeout(timer);
        waiters.delete(done);
        signal?.removeEventListener('abort', done);
      };
      const done = () => {
        stopWaiting();
        resolve();
      };
      // Listening before the deadlines are read: a wake-up while they are on their way ends the wait at once
      // instead of after the read.
      waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
      const now = clock.now();
      db.get<{ next_run: number | null; next_lease: number | null }>(
        `SELECT (SELECT MIN(run_after) FROM work_items WHERE state = 'queued'${claimable.sql}) AS next_run,
                (SELECT MIN(lease_expires_at) FROM work_items WHERE state IN (${inList(leasedStates)})) AS next_lease`,
        [...claimable.params, ...leasedStates],
      ).then(
        (due) => {
          if (!waiters.has(done)) return;
          const deadlines = [due?.next_run, due?.next_lease].filter(
            (value): value is number => value !== null && value !== undefined,
          );
          const nextDue =
            deadlines.length > 0 ? Math.min(...deadlines.map(Number)) : Number.POSITIVE_INFINITY;
          if (nextDue <= now) done();
          else timer = setTimeout(done, Math.min(config.pollIntervalMs, nextDue - now));
        },
        (error: unknown) => {
          if (!waiters.has(done)) return;
          stopWaiting();
          reject(error);
        },
      );
    });
  };

  /** `resume` and `unblock` differ only in the state they leave and the event that says so. */
  const requeueFrom = (
    id: string,
    from: 'paused' | 'blocked',
    event: 'work:resumed' | 'work:unblocked',
  ): Promise<WorkItem> =>
    withEffects(async (tx, effects) => {
      const now = clock.now();
      const item = await transition(
        tx,
        id,
        'queued',
        { run_after: now, state_reason: null },
        { now, from: [from] },
      );
      await wakeWorkersAfterCommit(tx, effects, () => publish(event, item, base(item)));
      return item;
    });

  return {
    config,
    submit,
    claim: async (workerId, filter) => (await claimBatch(workerId, 1, filter))[0],
    claimBatch,
    start: async (id, workerId) => {
      const now = clock.now();
      const item = await transition(
        db,
        id,
        'running',
        { started_at: now, lease_expires_at: now + config.leaseMs },
        { now, from: ['claimed'], leaseOwner: workerId },
      );
      publish('work:started', item, { ...base(item), workerId, attempt: item.attempts });
      return item;
    },
    heartbeat: async (id, workerId, heartbeatOptions = {}) => {
      const now = clock.now();
      const row = await db.get<WorkItemRow>(
        `UPDATE work_items SET lease_expires_at = ?, updated_at = ? WHERE id = ? AND ${leased.sql} AND lease_owner = ? AND lease_expires_at > ? RETURNING *`,
        [now + (heartbeatOptions.leaseMs ?? config.leaseMs), now, id, ...leased.params, workerId, now],
      );
      if (row) return rowToWorkItem(row);
      const current = await get(id);
      if (!current) throw notFound(id);
      throw leaseExpired(
        id,
        `the item is ${current.state}${current.leaseOwner ? ` and held by ${current.leaseOwner}` : ''}`,
      );
    },
    complete: async (id, workerId, result = {}) => {
      const [settled] = await completeMany(workerId, [{ ...result, id }]);
      if (settled!.status === 'rejected') throw settled!.reason;
      return settled!.value;
    },
    completeMany,
    fail: (id, workerId, error) =>
      withEffects(async (tx, effects) => {
        const now = clock.now();
        const current = await selectById(tx, id, true);
        if (!current) throw notFound(id);
        const durationMs = current.startedAt !== null ? now - current.startedAt : 0;
        const outcome = JSON.stringify({ error, durationMs });
        const failed = await transition(
          tx,
          id,
          'failed',
          { outcome, lease_owner: null, lease_expires_at: null, waiting_on: null, resolved_at: now },
          { now, from: leasedStates, leaseOwner: workerId },
        );
        if (error.retryable && failed.attempts < failed.maxAttempts) {
          const retryAt = now + backoffMs(failed.attempts);
          const requeued = await transition(
            tx,
            id,
            'queued',
            {
              run_after: retryAt,
              resolved_at: null,
              state_reason: `retry after: ${error.message}`.slice(0, 500),
            },
            { now, from: ['failed'] },
          );
          await wakeWorkersAfterCommit(tx, effects, () =>
            publish('work:failed', requeued, {
              ...base(requeued),
              error,
              attempt: failed.attempts,
              willRetry: true,
              retryAt,
            }),
          );
          return requeued;
        }
        if (error.retryable) {
          const dead = await transition(
            tx,
            id,
            'dead',
            { state_reason: 'attempts used up' },
            { now, from: ['failed'] },
          );
          await afterTerminal(tx, dead, now, effects);
          return dead;
        }
        await afterTerminal(tx, failed, now, effects);
        return failed;
      }),
    release: (id, workerId) =>
      withEffects(async (tx, effects) => {
        const now = clock.now();
        const item = await transition(
          tx,
          id,
          'queued',
          {
            lease_owner: null,
            lease_expires_at: null,
            run_after: now,
            state_reason: 'released by worker',
          },
          { now, from: leasedStates, leaseOwner: workerId },
        );
        // Handing work back is not a failed attempt.
        await tx.run('UPDATE work_items SET attempts = attempts - 1 WHERE id = ? AND attempts > 0', [id]);
        await wakeWorkersAfterCommit(tx, effects, () =>
          publish('work:requeued', item, { ...base(item), reason: 'released' }),
        );
        return { ...item, attempts: Math.max(0, item.attempts - 1) };
      }),
    cancel,
    pause: (id, pauseOptions = {}) =>
      withEffects(async (tx, effects) => {
        const now = clock.now();
        const before = await selectById(tx, id, true);
        if (!before) throw notFound(id);
        const item = await transition(
          tx,
          id,
          'paused',
          { state_reason: pauseOptions.reason ?? 'paused', lease_owner: null, lease_expires_at: null },
          { now },
        );
        effects.push(() => publish('work:paused', item, { ...base(item), previousState: before.state }));
        return item;
      }),
    resume: (id) => requeueFrom(id, 'paused', 'work:resumed'),
    block: (id, blockOptions) =>
      withEffects(async (tx, effects) => {
        const now = clock.now();
        const sets: Record<string, SqlValue> = {
          state_reason: blockOptions.reason,
          lease_owner: null,
          lease_expires_at: null,
          ...(blockOptions.waitingOn ? { waiting_on: JSON.stringify(blockOptions.waitingOn) } : {}),
        };
        const item = blockOptions.workerId
          ? await transition(tx, id, 'blocked', sets, {
              now,
              from: leasedStates,
              leaseOwner: blockOptions.workerId,
            })
          : await transition(tx, id, 'blocked', sets, { now, from: ['queued'] });
        effects.push(() =>
          publish('work:blocked', item, {
            ...base(item),
            reason: blockOptions.reason,
            waitingOn: item.waitingOn ?? [],
          }),
        );
        if (blockOptions.waitingOn && blockOptions.waitingOn.length > 0)
          await maybeUnblockParent(tx, id, now, effects);
        return (await selectById(tx, id)) ?? item;
      }),
    unblock: (id) => requeueFrom(id, 'blocked', 'work:unblocked'),
    setWaitingOn: async (id, workerId, childIds) => {
      const now = clock.now();
      const running = stateGuard(['running']);
      const row = await db.get<WorkItemRow>(
        `UPDATE work_items SET waiting_on = ?, updated_at = ? WHERE id = ? AND ${running.sql} AND lease_owner = ? AND lease_expires_at > ? RETURNING *`,
        [
          childIds && childIds.length > 0 ? JSON.stringify(childIds) : null,
          now,
          id,
          ...running.params,
          workerId,
          now,
        ],
      );
      if (!row) {
        const current = await get(id);
        if (!current) throw notFound(id);
        throw leaseExpired(id, `the item is ${current.state}`);
      }
      const item = rowToWorkItem(row);
      if (childIds && childIds.length > 0)
        publish('work:waiting', item, { ...base(item), waitingOn: childIds });
      return item;
    },
    get,
    getMany,
    list,
    counts,
    reapExpiredLeases,
    get wakeSequence() {
      return wakeSequence;
    },
    waitForWork,
    whenListening: () => notifier?.whenListening() ?? Promise.resolve(),
    async close() {
      if (closed) return;
      closed = true;
      wake();
      await notifier?.close();
    },
  };
}
