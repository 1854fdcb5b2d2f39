import { type BusEvent, createBus } from '../../../src/bus/index.js';
import type { EmbeddingProvider, MemoryConfigInput } from '../../../src/memory/index.js';
import {
  createMemoryContext,
  type MemoryContext,
  type RamSession,
} from '../../../src/memory/service/context.js';
import { ensureLoaded } from '../../../src/memory/service/ram.js';
import type { LanguageModel } from '../../../src/model/index.js';
import type { SqlDatabase } from '../../../src/store/index.js';
import { createManualClock, createSequentialIdGenerator } from '../../../src/util/index.js';
import { sessionRef } from '../memory-fixtures.js';

/** A memory context over `db` with a manual clock, and every bus event it published. */
export function stepContext(
  db: SqlDatabase,
  options: { config?: MemoryConfigInput; embedder?: EmbeddingProvider; model?: LanguageModel } = {},
) {
  const bus = createBus();
  const clock = createManualClock();
  const events: BusEvent[] = [];
  bus.subscribe({ types: ['memory:*', 'system:*'] }, (event) => events.push(event));
  const ctx: MemoryContext = createMemoryContext({
    db,
    bus,
    clock,
    idGenerator: createSequentialIdGenerator(),
    ...(options.config ? { config: options.config } : {}),
    ...(options.embedder ? { embedder: options.embedder } : {}),
    ...(options.model ? { model: options.model } : {}),
  });
  return { ctx, clock, events, types: () => events.map((event) => event.type) };
}

/** The session's RAM context, loaded (under its lock) the way the service loads it. */
export function loaded(ctx: MemoryContext, key = 'main'): Promise<RamSession> {
  const ref = sessionRef(key);
  return ctx.mutex.run(ref.sessionId, () => ensureLoaded(ctx, ref));
}

/**
 * Wraps `db` so every statement fails while `broken` is set, with SQLite's I/O error as its driver throws it: a
 * disk that fails and comes back.
 */
export function breakableDatabase(db: SqlDatabase): SqlDatabase & { broken: boolean } {
  const wrapper = {
    ...db,
    broken: false,
    dialect: db.dialect,
    location: db.location,
    persistent: db.persistent,
    close: () => db.close(),
  } as SqlDatabase & { broken: boolean };
  const guard =
    <A extends unknown[], R>(method: (...args: A) => Promise<R>) =>
    (...args: A): Promise<R> =>
      wrapper.broken ? Promise.reject(sqliteIoError()) : method(...args);
  wrapper.run = guard(db.run.bind(db)) as SqlDatabase['run'];
  wrapper.get = guard(db.get.bind(db)) as SqlDatabase['get'];
  wrapper.all = guard(db.all.bind(db)) as SqlDatabase['all'];
  wrapper.transaction = guard(db.transaction.bind(db)) as SqlDatabase['transaction'];
  return wrapper;
}

/** SQLite's error for a failed read or write of the file: the database is there but unusable for now. */
export function sqliteIoError(): Error {
  return Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' });
}
