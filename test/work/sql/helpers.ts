import type { BusEvent } from '../../../src/bus/index.js';
import { createBus } from '../../../src/bus/index.js';
import type { SqlDatabase } from '../../../src/store/index.js';
import { createManualClock, createSequentialIdGenerator } from '../../../src/util/index.js';
import type { WorkConfig } from '../../../src/work/config.js';
import { claimOnce } from '../../../src/work/sql/claim.js';
import { createQueueContext, type QueueContext } from '../../../src/work/sql/context.js';
import { selectById } from '../../../src/work/sql/read.js';
import { submit } from '../../../src/work/sql/submit.js';
import type { WorkItem, WorkSubmission } from '../../../src/work/types.js';

/** A queue context over `db` with a manual clock, sequential ids and the `work:*` events it published. */
export function stepContext(db: SqlDatabase, config: Partial<Omit<WorkConfig, 'awareness'>> = {}) {
  const clock = createManualClock();
  const bus = createBus({ clock });
  const events: BusEvent[] = [];
  bus.subscribe({ types: ['work:*'] }, (event) => events.push(event));
  const ctx: QueueContext = createQueueContext({
    db,
    bus,
    clock,
    idGenerator: createSequentialIdGenerator(),
    config,
  });
  return { ctx, clock, events, types: () => events.map((event) => event.type) };
}

/** Submits one item and returns it as stored. */
export async function submitted(
  ctx: QueueContext,
  submission: Partial<WorkSubmission> = {},
): Promise<WorkItem> {
  const { id } = await submit(ctx, { kind: 'task', description: 'do it', ...submission });
  return (await selectById(ctx, ctx.db, id))!;
}

/** Submits one item and claims it for `workerId` (started when `start`). */
export async function claimed(
  ctx: QueueContext,
  workerId = 'w1',
  options: { start?: boolean; submission?: Partial<WorkSubmission> } = {},
): Promise<WorkItem> {
  const item = await submitted(ctx, options.submission);
  const [claimedItem] = await claimOnce(ctx, workerId, 1, { start: options.start ?? false });
  if (claimedItem?.id !== item.id) throw new Error(`expected to claim ${item.id}`);
  return claimedItem;
}
