import type { z } from 'zod';
import type { SqlExecutor, SqlValue } from '../../store/index.js';
import { ErrorCodes, formatZodIssues, UserInputError } from '../../util/index.js';
import { rowToWorkItem, type WorkItemRow } from '../rows.js';
import { isTerminalWorkState, liveWorkStates, WorkErrorCodes, type WorkState } from '../states.js';
import { type SubmitResult, type WorkItem, type WorkSubmission, workSubmissionSchema } from '../types.js';
import { type IdleClaimer, storeAhead, takeIdleSlot } from './ahead.js';
import { noteDeadline, type QueueContext } from './context.js';
import { notify, withEffects } from './effects.js';
import { announceSubmitted, eventBase, publish } from './events.js';
import { inList, notFound } from './guards.js';
import { selectById } from './read.js';

type ParsedSubmission = z.output<typeof workSubmissionSchema>;

/** The columns a submission sets, known before the row exists. */
interface NewRow {
  id: string;
  state: WorkState;
  dedupKey: string | null;
  mergedInto: string | null;
  depth: number;
  priority: number;
  sessionKey: string | null;
}

/** A submission handed to an idle worker of this process: inserted started under its lease. */
interface HandedOff {
  claimer: IdleClaimer;
  leaseExpiresAt: number;
}

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
  'submit_key',
];
const insertSql = `INSERT INTO work_items (${insertColumns.join(', ')}) VALUES (${inList(insertColumns)})`;
const handedOffColumns = [...insertColumns, 'lease_owner', 'lease_expires_at', 'started_at'];
const insertHandedOffSql = `INSERT INTO work_items (${handedOffColumns.join(', ')}) VALUES (${inList(handedOffColumns)})`;

/** The idle worker of this process a new item goes to, if one waits for it (see `takeIdleSlot`). */
function handOffTarget(ctx: QueueContext, input: ParsedSubmission, now: number): HandedOff | undefined {
  if (input.paused || input.delayMs) return undefined;
  const claimer = takeIdleSlot(ctx, { kind: input.kind, agentId: input.agentId ?? null });
  return claimer && { claimer, leaseExpiresAt: now + (claimer.filter.leaseMs ?? ctx.config.leaseMs) };
}

/**
 * Announces a new item. One handed off is in its worker's buffer, still announced as the queued item it
 * is to everyone else: its claim and start are announced when the worker takes it.
 */
function announceNew(ctx: QueueContext, item: WorkItem, handedOff: HandedOff | undefined): void {
  if (!handedOff) {
    announceSubmitted(ctx, item);
    return;
  }
  const { claimer } = handedOff;
  // Storing it wakes the worker; nobody else may take it, so the announcement wakes no one.
  storeAhead(ctx, claimer.key, claimer.workerId, claimer.filter, [item]);
  announceSubmitted(
    ctx,
    { ...item, state: 'queued', attempts: 0, leaseOwner: null, leaseExpiresAt: null, startedAt: null },
    false,
  );
}

function rowValues(
  ctx: QueueContext,
  input: ParsedSubmission,
  row: NewRow,
  now: number,
  handedOff?: HandedOff,
): SqlValue[] {
  const values: SqlValue[] = [
    row.id,
    input.kind,
    input.agentId ?? null,
    input.title ?? (input.description.split('\n')[0]?.slice(0, 120) || input.kind),
    input.description,
    JSON.stringify(input.params),
    row.priority,
    handedOff ? 'running' : row.state,
    row.dedupKey,
    row.mergedInto,
    input.parentId ?? null,
    row.depth,
    handedOff ? 1 : 0,
    input.maxAttempts ?? ctx.config.maxAttempts,
    now + (input.delayMs ?? 0),
    input.speculative ? 1 : 0,
    input.rationale ?? null,
    row.sessionKey,
    input.source ?? null,
    now,
    now,
    row.state === 'merged' ? now : null,
    input.idempotencyKey ?? null,
  ];
  if (handedOff) values.push(handedOff.claimer.workerId, handedOff.leaseExpiresAt, now);
  return values;
}

/** What the submission made under `key` answered, if one did. */
async function submittedUnder(tx: SqlExecutor, key: string): Promise<SubmitResult | undefined> {
  const earlier = await tx.get<{ id: string; state: string; merged_into: string | null }>(
    'SELECT id, state, merged_into FROM work_items WHERE submit_key = ?',
    [key],
  );
  if (!earlier) return undefined;
  return earlier.state === 'merged' && earlier.merged_into !== null
    ? { id: earlier.merged_into, merged: true, mergedRecordId: earlier.id, duplicate: true }
    : { id: earlier.id, merged: false, duplicate: true };
}

/** Child work, dedup and idempotency keys read other rows first, so they run in a transaction. */
function submitChecked(ctx: QueueContext, input: ParsedSubmission, now: number): Promise<SubmitResult> {
  const { config } = ctx;
  return withEffects(ctx, async (tx, effects): Promise<SubmitResult> => {
    // First: a retry of child work whose parent has ended since is answered, not refused.
    if (input.idempotencyKey !== undefined) {
      const earlier = await submittedUnder(tx, input.idempotencyKey);
      if (earlier) return earlier;
    }
    let depth = 0;
    let priority = input.priority ?? 0;
    let sessionKey = input.sessionKey ?? null;
    if (input.parentId) {
      const parent = await selectById(ctx, tx, input.parentId);
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
    const id = ctx.idGenerator('work');
    const state: WorkState = input.paused ? 'paused' : 'queued';
    const fields: NewRow = {
      id,
      state,
      dedupKey: input.dedupKey ?? null,
      mergedInto: null,
      depth,
      priority,
      sessionKey,
    };
    const handedOff = handOffTarget(ctx, input, now);
    const keyed = input.dedupKey !== undefined || input.idempotencyKey !== undefined;
    const inserted = await tx.get<WorkItemRow>(
      `${handedOff ? insertHandedOffSql : insertSql}${keyed ? ' ON CONFLICT DO NOTHING' : ''} RETURNING *`,
      rowValues(ctx, input, fields, now, handedOff),
    );
    if (!inserted) {
      // Merged into a live item, or another submission under the key committed first: the worker's slot
      // stays free.
      if (handedOff) handedOff.claimer.slots++;
      if (input.idempotencyKey !== undefined) {
        const earlier = await submittedUnder(tx, input.idempotencyKey);
        if (earlier) return earlier;
      }
      const live =
        input.dedupKey === undefined
          ? undefined
          : await tx.get<WorkItemRow>(
              `SELECT * FROM work_items WHERE kind = ? AND dedup_key = ? AND state IN (${inList(liveWorkStates)})`,
              [input.kind, input.dedupKey, ...liveWorkStates],
            );
      // What it conflicted with is gone already (ended and pruned in between): the caller may try again.
      if (!live)
        throw new UserInputError({
          code: ErrorCodes.conflict,
          message: `work item id ${id} already exists.`,
          retryable: true,
        });
      await tx.run(
        insertSql,
        rowValues(ctx, input, { ...fields, state: 'merged', dedupKey: null, mergedInto: live.id }, now),
      );
      const liveItem = rowToWorkItem(live);
      effects.push(() =>
        publish(ctx, 'work:merged', liveItem, {
          ...eventBase(liveItem),
          mergedRecordId: id,
          dedupKey: input.dedupKey!,
        }),
      );
      return { id: live.id, merged: true, mergedRecordId: id };
    }
    const item = rowToWorkItem(inserted);
    // Handed off: no NOTIFY, as for any claim, since no other process may take it.
    if (state === 'queued' && !handedOff) await notify(ctx, tx, { t: 'wake' });
    effects.push(() => announceNew(ctx, item, handedOff));
    return { id, merged: false };
  });
}

/** Creates an item, or merges it into a live one with the same kind and dedup key. */
export async function submit(ctx: QueueContext, submission: WorkSubmission): Promise<SubmitResult> {
  const parsed = workSubmissionSchema.safeParse(submission);
  if (!parsed.success) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `invalid work submission: ${formatZodIssues(parsed.error.issues)}`,
    });
  }
  const input = parsed.data;
  const now = ctx.clock.now();
  if (input.delayMs) noteDeadline(ctx.state, now + input.delayMs);
  if (input.parentId || input.dedupKey !== undefined || input.idempotencyKey !== undefined)
    return submitChecked(ctx, input, now);
  // Nothing to check against other rows: one statement (with its NOTIFY on Postgres), no transaction.
  const id = ctx.idGenerator('work');
  const state: WorkState = input.paused ? 'paused' : 'queued';
  const fields: NewRow = {
    id,
    state,
    dedupKey: null,
    mergedInto: null,
    depth: 0,
    priority: input.priority ?? 0,
    sessionKey: input.sessionKey ?? null,
  };
  const handedOff = handOffTarget(ctx, input, now);
  const values = rowValues(ctx, input, fields, now, handedOff);
  const row = handedOff
    ? await ctx.db.get<WorkItemRow>(`${insertHandedOffSql} RETURNING *`, values)
    : ctx.isPostgres && state === 'queued'
      ? await ctx.db.get<WorkItemRow>(
          `WITH inserted AS (${insertSql} RETURNING *) SELECT inserted.*, pg_notify(?, ?) AS notified FROM inserted`,
          [...values, ctx.channel, JSON.stringify({ o: ctx.instanceId, t: 'wake' })],
        )
      : await ctx.db.get<WorkItemRow>(`${insertSql} RETURNING *`, values);
  announceNew(ctx, rowToWorkItem(row!), handedOff);
  return { id, merged: false };
}
