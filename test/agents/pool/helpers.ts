import { createPoolState } from '../../../src/agents/pool/state.js';
import type { CreateWorkerPoolOptions } from '../../../src/agents/pool/types.js';
import { type BusEvent, createBus } from '../../../src/bus/index.js';
import type { SqlDatabase } from '../../../src/store/index.js';
import { createManualClock, createSequentialIdGenerator } from '../../../src/util/index.js';
import { createWorkQueue } from '../../../src/work/index.js';

/** A pool state over a real queue on `db`; nothing runs until a step is called. */
export function poolFixture(db: SqlDatabase, options: Partial<CreateWorkerPoolOptions> = {}) {
  const clock = createManualClock();
  const bus = createBus({ clock });
  const events: BusEvent[] = [];
  bus.subscribe({}, (event) => events.push(event));
  const queue = createWorkQueue({ db, bus, clock, idGenerator: createSequentialIdGenerator() });
  const pool = createPoolState({
    queue,
    bus,
    idGenerator: createSequentialIdGenerator(),
    runItem: async () => ({ summary: 'done' }),
    ...options,
  });
  return { pool, queue, bus, clock, events, types: () => events.map((event) => event.type) };
}
