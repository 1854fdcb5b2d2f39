import { expect, it } from 'vitest';
import { createLedger } from '../../../src/ledger/index.js';
import type { createManualClock } from '../../../src/util/index.js';
import { cancel } from '../../../src/work/sql/cancel.js';
import { claimOnce } from '../../../src/work/sql/claim.js';
import { complete } from '../../../src/work/sql/complete.js';
import type { QueueContext } from '../../../src/work/sql/context.js';
import { fail } from '../../../src/work/sql/fail.js';
import { deleteEnded, type EndedLane } from '../../../src/work/sql/prune.js';
import { list, selectById } from '../../../src/work/sql/read.js';
import { submit } from '../../../src/work/sql/submit.js';
import { terminalWorkStates } from '../../../src/work/states.js';
import type { WorkItem, WorkSubmission } from '../../../src/work/types.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { dayMs, deletes, now, planOf, recording } from '../../helpers/retention.js';
import { stepContext } from './helpers.js';

const stateLanes: EndedLane[] = [...terminalWorkStates].map((state) => ({ state }));

type Clock = ReturnType<typeof createManualClock>;
type EndState = 'completed' | 'failed' | 'dead' | 'cancelled';

let agents = 0;

/** Submits an item at `at`, for an agent of its own, so that a claim for that agent takes it and no other. */
async function submitAt(
  ctx: QueueContext,
  clock: Clock,
  at: number,
  submission: Partial<WorkSubmission> = {},
): Promise<WorkItem> {
  clock.set(at);
  const { id } = await submit(ctx, {
    kind: 'task',
    description: 'do it',
    ...submission,
    agentId: `agent-${++agents}`,
  });
  return (await selectById(ctx, ctx.db, id))!;
}

/** Ends a live item at `at`, the way its state is reached. */
async function endAt(
  ctx: QueueContext,
  clock: Clock,
  at: number,
  item: WorkItem,
  state: EndState,
): Promise<WorkItem> {
  clock.set(at);
  if (state === 'cancelled') return cancel(ctx, item.id, { cascade: false });
  const [claimed] = await claimOnce(ctx, 'w1', 1, { start: true, agentIds: [item.agentId!] });
  if (claimed?.id !== item.id) throw new Error(`expected to claim ${item.id}`);
  if (state === 'completed') return complete(ctx, item.id, 'w1');
  // A retryable error on the last attempt ends dead; any other failure, failed.
  return fail(ctx, item.id, 'w1', { code: 'BROKEN', message: 'no', retryable: state === 'dead' });
}

async function endedAt(
  ctx: QueueContext,
  clock: Clock,
  at: number,
  state: EndState,
  submission: Partial<WorkSubmission> = {},
): Promise<WorkItem> {
  const item = await submitAt(ctx, clock, at, { ...submission, maxAttempts: 1 });
  return endAt(ctx, clock, at, item, state);
}

/** Walks every lane to its end, as the retention does. */
async function pruneLanes(
  ctx: QueueContext,
  lanes: EndedLane[],
  before: number,
  maxRows = 1_000,
): Promise<number> {
  let deleted = 0;
  for (const lane of lanes) {
    let after: number | undefined;
    do {
      const step = await deleteEnded(ctx, {
        lane,
        before,
        maxRows,
        ...(after !== undefined ? { after } : {}),
      });
      deleted += step.deleted;
      after = step.nextAfter;
    } while (after !== undefined);
  }
  return deleted;
}

const remaining = async (ctx: QueueContext) =>
  (await list(ctx, { limit: 10_000 })).map((item) => item.id).sort();

describeEachDatabase('work sql: prune', (getDb) => {
  it('deletes the items of every terminal state that ended before the cutoff, and keeps the rest', async () => {
    const { ctx, clock } = stepContext(getDb());
    const old = now - 40 * dayMs;
    // Live for forty days, and holding the dedup key that the merged submission below was merged into.
    const liveSinceLongAgo = await submitAt(ctx, clock, old, { dedupKey: 'report' });
    clock.set(old);
    const merged = await submit(ctx, { kind: 'task', description: 'again', dedupKey: 'report' });
    const gone = [merged.mergedRecordId!];
    for (const state of ['completed', 'failed', 'dead', 'cancelled'] as const)
      gone.push((await endedAt(ctx, clock, old, state)).id);
    const justPast = await endedAt(ctx, clock, now - 30 * dayMs - 1, 'completed');
    gone.push(justPast.id);
    const kept = [
      liveSinceLongAgo.id,
      (await endedAt(ctx, clock, now - 30 * dayMs, 'completed')).id,
      (await endedAt(ctx, clock, now - dayMs, 'failed')).id,
      (await endedAt(ctx, clock, now, 'cancelled')).id,
      (await submitAt(ctx, clock, old, { paused: true })).id,
    ];
    const running = await submitAt(ctx, clock, old);
    await claimOnce(ctx, 'w1', 1, { start: true, agentIds: [running.agentId!] });
    kept.push(running.id);
    expect((await selectById(ctx, ctx.db, merged.mergedRecordId!))?.state).toBe('merged');

    expect(await pruneLanes(ctx, stateLanes, now - 30 * dayMs)).toBe(gone.length);
    expect(await remaining(ctx)).toEqual([...kept].sort());
    expect(await pruneLanes(ctx, stateLanes, now - 30 * dayMs)).toBe(0);
  });

  it("a kind's lane deletes that kind's top-level items only", async () => {
    const { ctx, clock } = stepContext(getDb());
    const twoDaysAgo = now - 2 * dayMs;
    await endedAt(ctx, clock, twoDaysAgo, 'completed', { kind: 'memory.maintain' });
    await endedAt(ctx, clock, twoDaysAgo, 'failed', { kind: 'memory.maintain' });
    const recentMaintenance = await endedAt(ctx, clock, now - dayMs / 2, 'completed', {
      kind: 'memory.maintain',
    });
    const task = await endedAt(ctx, clock, twoDaysAgo, 'completed');
    // Maintenance as someone's child goes with its family, by the lanes of the states.
    const parent = await submitAt(ctx, clock, twoDaysAgo);
    const childMaintenance = await endedAt(ctx, clock, twoDaysAgo, 'completed', {
      kind: 'memory.maintain',
      parentId: parent.id,
    });
    await endAt(ctx, clock, twoDaysAgo, parent, 'completed');
    const live = await submitAt(ctx, clock, twoDaysAgo, { kind: 'memory.maintain' });

    expect(await pruneLanes(ctx, [{ kind: 'memory.maintain' }], now - dayMs)).toBe(2);
    expect(await remaining(ctx)).toEqual(
      [recentMaintenance.id, task.id, parent.id, childMaintenance.id, live.id].sort(),
    );
  });

  it('keeps a family until all of it ended before the cutoff, then deletes it children first', async () => {
    const { ctx, clock } = stepContext(getDb());
    const old = now - 40 * dayMs;
    const before = now - 30 * dayMs;
    // An ended child of a live parent: the parent reads it when it resumes.
    const liveParent = await submitAt(ctx, clock, old);
    const childOfLive = await endedAt(ctx, clock, old, 'completed', { parentId: liveParent.id });
    // An ended parent of a live child.
    const parentOfLive = await submitAt(ctx, clock, old);
    const liveChild = await submitAt(ctx, clock, old, { parentId: parentOfLive.id });
    await endAt(ctx, clock, old, parentOfLive, 'completed');
    // An old child of a parent that ended recently.
    const recentParent = await submitAt(ctx, clock, old);
    const childOfRecent = await endedAt(ctx, clock, old, 'completed', { parentId: recentParent.id });
    await endAt(ctx, clock, now - dayMs, recentParent, 'completed');
    // A whole family ended long ago: a grandchild, its parent, and theirs.
    const root = await submitAt(ctx, clock, old);
    const middle = await submitAt(ctx, clock, old, { parentId: root.id });
    await endedAt(ctx, clock, old, 'completed', { parentId: middle.id });
    await endAt(ctx, clock, old + 1, middle, 'completed');
    await endAt(ctx, clock, old + 2, root, 'completed');

    const kept = [liveParent, childOfLive, parentOfLive, liveChild, recentParent, childOfRecent].map(
      (item) => item.id,
    );
    expect(await pruneLanes(ctx, stateLanes, before)).toBe(1);
    expect(await remaining(ctx)).toEqual([...kept, root.id, middle.id].sort());
    expect(await pruneLanes(ctx, stateLanes, before)).toBe(1);
    expect(await remaining(ctx)).toEqual([...kept, root.id].sort());
    expect(await pruneLanes(ctx, stateLanes, before)).toBe(1);
    expect(await remaining(ctx)).toEqual([...kept].sort());
    expect(await pruneLanes(ctx, stateLanes, before)).toBe(0);

    // Once the live ones have ended, a cutoff after them all takes the rest, children first.
    await endAt(ctx, clock, old, liveChild, 'cancelled');
    await endAt(ctx, clock, now - 31 * dayMs, liveParent, 'completed');
    let deleted = 0;
    for (let prune = 0; prune < 2; prune++) deleted += await pruneLanes(ctx, stateLanes, now + 1);
    expect(deleted).toBe(kept.length);
    expect(await remaining(ctx)).toEqual([]);
  });

  it('deletes an item that has ledger entries and leaves its ledger whole and readable', async () => {
    const { ctx, clock } = stepContext(getDb());
    const ledger = createLedger({ db: getDb(), clock });
    const item = await submitAt(ctx, clock, now - 40 * dayMs);
    await ledger.append(item.id, { entryType: 'plan', content: 'read the report' });
    await ledger.append(item.id, { entryType: 'finding', content: 'the report is late' });
    await endAt(ctx, clock, now - 40 * dayMs, item, 'completed');
    const entries = await ledger.read(item.id);
    const rows = async () =>
      Number((await getDb().get<{ n: number }>('SELECT COUNT(*) AS n FROM work_ledger'))?.n);
    expect(await rows()).toBe(2);

    expect(await pruneLanes(ctx, stateLanes, now - 30 * dayMs)).toBe(1);
    expect(await selectById(ctx, ctx.db, item.id)).toBeUndefined();
    expect(await ledger.read(item.id)).toEqual(entries);
    expect(await rows()).toBe(2);
    expect(await ledger.listRecentFindings({ sinceMs: 0, limit: 10 })).toEqual([entries[1]]);
  });

  it('deletes in batches of maxRows items, each a statement of its own, with the same-millisecond items of the last', async () => {
    const { ctx, clock } = stepContext(getDb());
    const base = now - 2 * dayMs;
    const old: string[] = [];
    for (let index = 0; index < 10; index++)
      old.push((await endedAt(ctx, clock, base + index, 'completed')).id);
    // Four more ended in one millisecond (a batch of completions): a batch never splits them.
    for (let index = 0; index < 4; index++) old.push((await endedAt(ctx, clock, base + 20, 'completed')).id);
    const recent = await endedAt(ctx, clock, now - 1_000, 'completed');
    const { db, statements } = recording(getDb());
    const recorded: QueueContext = { ...ctx, db };

    expect(await pruneLanes(recorded, [{ state: 'completed' }], now - dayMs, 3)).toBe(14);
    expect(await remaining(ctx)).toEqual([recent.id]);
    const batches = deletes(statements);
    // Items 0–2, 3–5, 6–8, then 9 and two of the four, whose millisecond brings in the other two.
    expect(batches).toHaveLength(4);
    expect(statements).toHaveLength(9);
    expect(statements.at(-1)!.sql).toMatch(/^SELECT COUNT\(\*\) AS n/);
  });

  it('with nothing to delete reads one bounded range of an index per lane', async () => {
    const { ctx, clock } = stepContext(getDb());
    for (let index = 0; index < 20; index++) {
      await endedAt(ctx, clock, now - index, 'completed');
      await endedAt(ctx, clock, now - index, 'cancelled', { kind: 'memory.maintain' });
    }
    await submitAt(ctx, clock, now - 40 * dayMs);
    const { db, statements } = recording(getDb());
    const recorded: QueueContext = { ...ctx, db };
    const lanes: EndedLane[] = [...stateLanes, { kind: 'memory.maintain' }];

    expect(await pruneLanes(recorded, lanes, now - dayMs)).toBe(0);
    expect(statements).toHaveLength(lanes.length);
    expect(deletes(statements)).toEqual([]);
    for (const statement of statements) {
      const plan = await planOf(getDb(), statement);
      const index =
        statement.params[0] === 'memory.maintain' ? 'work_items_ended_by_kind' : 'work_items_state_resolved';
      if (getDb().dialect === 'sqlite') {
        expect(plan).toContain(`SEARCH work_items USING COVERING INDEX ${index}`);
        expect(plan).not.toMatch(/SCAN work_items|TEMP B-TREE/);
      } else {
        expect(plan).toMatch(new RegExp(`Index Only Scan using ${index}`));
        expect(plan).not.toMatch(/Seq Scan|Sort/);
      }
    }

    // The deletes are ranges of the same indexes, with one lookup per row for the family.
    await endedAt(ctx, clock, now - 2 * dayMs, 'completed');
    await endedAt(ctx, clock, now - 2 * dayMs, 'completed', { kind: 'memory.maintain' });
    statements.length = 0;
    expect(
      await pruneLanes(recorded, [{ kind: 'memory.maintain' }, { state: 'completed' }], now - dayMs),
    ).toBe(2);
    const [byKind, byState] = deletes(statements);
    for (const [statement, index] of [
      [byState!, 'work_items_state_resolved'],
      [byKind!, 'work_items_ended_by_kind'],
    ] as const) {
      const plan = await planOf(getDb(), statement);
      if (getDb().dialect === 'sqlite') {
        expect(plan).toContain(`SEARCH ended USING INDEX ${index}`);
        expect(plan).toContain('SEARCH child USING COVERING INDEX work_items_parent (parent_id=?)');
        expect(plan).not.toMatch(/SCAN (ended|child|parent|work_items)/);
      } else {
        expect(plan).toMatch(new RegExp(`(Index Scan using|Bitmap Index Scan on) ${index}`));
        expect(plan).toMatch(/Index (Only )?Scan using work_items_parent on work_items child/);
        expect(plan).toMatch(/Index Scan using work_items_pkey on work_items parent/);
        expect(plan).not.toMatch(/Seq Scan|hashed SubPlan|Join/);
      }
    }
  });
});
