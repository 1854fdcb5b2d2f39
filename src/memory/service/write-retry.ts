import { mightSucceedLater, type SqlExecutor } from '../../store/index.js';
import {
  AgentdError,
  coerceError,
  createBackoffTimer,
  ErrorCodes,
  SystemError,
  UserInputError,
} from '../../util/index.js';
import { MemoryIdsTakenError, type Retirement, type StoredEntry, type TouchedIdRange } from '../ltm-store.js';
import type { MemoryContext, RamSession, WriteRetryState } from './context.js';
import { rememberCommitted } from './prompt-lines.js';
import { RecordedAlso } from './recorded-also.js';
import type { AlsoInTransaction } from './types.js';

/**
 * The write-retry state of a writable database: `retry` runs `retryWrites` after `writeRetryMs`, doubling
 * up to `maxWriteRetryMs` (never below the first).
 */
export function createWriteRetryState(
  config: { writeRetryMs: number; maxWriteRetryMs: number },
  retryWrites: () => void,
): WriteRetryState {
  return {
    degradedReason: undefined,
    degradedSinceMs: 0,
    pendingWrites: new Map(),
    ramCounters: new Map(),
    retry: createBackoffTimer({
      firstDelayMs: config.writeRetryMs,
      maxDelayMs: Math.max(config.writeRetryMs, config.maxWriteRetryMs),
      run: retryWrites,
    }),
  };
}

/** Writes accepted while degraded and not written through yet. */
export function pendingCount(ctx: MemoryContext): number {
  let count = 0;
  for (const pending of ctx.writes.pendingWrites.values()) count += pending.writes.length;
  return count;
}

/** Arms the retry timer (once), doubling the delay up to `maxWriteRetryMs` each time. */
export function scheduleRetry(ctx: MemoryContext): void {
  ctx.writes.retry.arm();
}

/** The database failed: keep going in RAM, retry in the background, and say so once. */
export function enterDegraded(ctx: MemoryContext, error: unknown): void {
  const state = ctx.writes;
  scheduleRetry(ctx);
  if (state.degradedReason !== undefined) return;
  const failure = coerceError(error);
  state.degradedReason = failure.message;
  state.degradedSinceMs = ctx.clock.now();
  ctx.logger.error(
    { err: error, location: ctx.db.location },
    'memory database write failed; continuing in RAM and retrying until the database is back',
  );
  const message = `Memory could not be saved to ${ctx.db.location} (${failure.message}); new memories are kept in RAM and written through when the database is back. Until then a restart loses them.`;
  ctx.bus.publish('memory:degraded', { reason: message, code: ErrorCodes.storeUnavailable });
  ctx.bus.publish('system:error', { code: ErrorCodes.storeUnavailable, message, component: 'memory' });
}

/**
 * A write the rows refused (an agentd error coded CONFLICT: ids another writer took, an instance another
 * process ended), not the database: trying it again later cannot help (AlsoInTransaction).
 */
const refusedByRows = (error: unknown): error is AgentdError =>
  AgentdError.isInstance(error) && error.code === ErrorCodes.conflict;

/** Writes one session's queued writes through, oldest first; each commit is its own transaction. */
async function flushSession(ctx: MemoryContext, sessionId: string): Promise<number> {
  const pending = ctx.writes.pendingWrites.get(sessionId);
  let written = 0;
  while (pending && pending.writes.length > 0) {
    await ctx.ltm.transaction(pending.writes[0]!);
    pending.writes.shift();
    written++;
  }
  ctx.writes.pendingWrites.delete(sessionId);
  return written;
}

/** Tries the database again: writes everything queued through, and leaves degraded mode when that worked. */
export async function retryWrites(ctx: MemoryContext): Promise<void> {
  const state = ctx.writes;
  if (state.degradedReason === undefined) return;
  let written = 0;
  try {
    for (const sessionId of [...state.pendingWrites.keys()]) {
      try {
        written += await ctx.mutex.run(sessionId, () => flushSession(ctx, sessionId));
      } catch (error) {
        const refused = refusedByRows(error);
        if (refused || !mightSucceedLater(error)) {
          // Ids taken in the database meanwhile (the session could not even be read when it was loaded), an
          // instance another process ended (a chat turn's SessionEndedError), or a defect the write met once
          // the database was back (a constraint, a bug): retrying these writes would keep memory degraded
          // forever. The session's later writes go too: they take ids and retire entries after this one's.
          const dropped = state.pendingWrites.get(sessionId)?.writes.length ?? 0;
          state.pendingWrites.delete(sessionId);
          const message = `${dropped} memory write(s) of session ${sessionId} could not be written through: ${coerceError(error).message}`;
          ctx.logger.error({ err: error, sessionId }, message);
          ctx.bus.publish('system:error', {
            code: refused ? ErrorCodes.storeUnavailable : ErrorCodes.internal,
            message,
            component: 'memory',
          });
          continue;
        }
        throw error;
      }
    }
    // Nothing was queued (a read failed): a write transaction proves the database is usable again.
    if (written === 0) await ctx.ltm.transaction(async (tx) => void (await tx.get('SELECT 1 AS ok')));
  } catch (error) {
    ctx.logger.warn({ err: error, written }, 'memory database still not writable; retrying later');
    scheduleRetry(ctx);
    return;
  }
  if (pendingCount(ctx) > 0) {
    // Writes queued while this pass ran; the next pass takes them.
    scheduleRetry(ctx);
    return;
  }
  const degradedForMs = ctx.clock.now() - state.degradedSinceMs;
  state.degradedReason = undefined;
  state.retry.reset();
  state.ramCounters.clear();
  ctx.logger.warn(
    { writtenThrough: written, degradedForMs },
    'memory database writable again; left RAM-only mode',
  );
  ctx.bus.publish('memory:recovered', { writtenThrough: written, degradedForMs });
}

/**
 * Runs a database read; on failure answers from RAM instead. A database that cannot answer now puts memory in
 * degraded mode (retried in the background); a defect in the read does not: degraded, new chat messages are
 * refused, and the retry that ends it would clear it only until the same read failed again.
 */
export async function readWithFallback<T>(
  ctx: MemoryContext,
  fromDb: () => Promise<T>,
  fromRam: () => T,
): Promise<T> {
  try {
    return await fromDb();
  } catch (error) {
    if (mightSucceedLater(error)) enterDegraded(ctx, error);
    else
      ctx.logger.error(
        { err: error },
        'memory read failed for a reason retrying cannot fix; answered from RAM',
      );
  }
  return fromRam();
}

/** The lowest MemoryID of the RAM context's active entries (Infinity: none). */
function lowestActiveId(ram: RamSession): number {
  let lowest = Number.POSITIVE_INFINITY;
  for (const entry of ram.entries)
    if (entry.state === 'active' && entry.memoryId < lowest) lowest = entry.memoryId;
  return lowest;
}

/**
 * The instance's id range for a commit that RAM has not applied yet. Every entry active in the database is
 * active in RAM until a commit retires it (RAM applies a commit after it), and the commit's new entries take
 * ids from `nextId` on, so both bounds hold once the commit is in.
 */
function idRangeOf(ram: RamSession): TouchedIdRange {
  return {
    firstId: ram.nextId,
    liveFromId: ram.knowsStoredActive ? Math.min(ram.nextId, lowestActiveId(ram)) : null,
  };
}

/** How stale `memory_sessions.last_active_ms` may be while a session keeps committing. */
const storedActivityMs = 1_000;

/**
 * Reserves ids for `count` new entries, builds them, and commits them together with `retire` (the entries
 * they take out of the context and its event) and `also` in one transaction (on Postgres usually one
 * statement). While the database cannot be written (or earlier writes of the session still wait), the entries
 * get ids from the RAM counter and the whole commit is queued to be written through in order — unless
 * `requireCommit`: then the write fails with STORE_UNAVAILABLE and nothing is queued, for a caller that
 * acknowledges the write to someone as stored. Only a database that cannot take the write now
 * (`mightSucceedLater`) is waited out that way; a conflict or a defect fails the commit at once, with nothing
 * queued and memory not degraded. `also` issues all its statements before it first awaits anything and fails
 * only when one of them does (`AlsoInTransaction`).
 */
export async function commit(
  ctx: MemoryContext,
  ram: RamSession,
  count: number,
  build: (firstId: number) => StoredEntry[],
  also?: AlsoInTransaction,
  options: { requireCommit?: boolean; retire?: Retirement } = {},
): Promise<StoredEntry[]> {
  const { requireCommit = false, retire } = options;
  const { ltm, writes: state } = ctx;
  const nowMs = ctx.clock.now();
  const writable = state.degradedReason === undefined && !state.pendingWrites.has(ram.ref.sessionId);
  if (!writable && requireCommit)
    throw new SystemError({
      code: ErrorCodes.storeUnavailable,
      message: `memory cannot be written to the database now (${state.degradedReason ?? 'earlier writes are still queued'})`,
      retryable: true,
    });
  if (writable) {
    // The stored last-activity time may lag by up to `storedActivityMs`: a busy session's commits (two a
    // chat turn) then skip that statement, one round trip on Postgres. The first commit always writes it.
    const touches = ram.storedActiveMs === undefined || nowMs - ram.storedActiveMs >= storedActivityMs;
    // On Postgres the `also` of a commit with entries (an append's) runs once, its statements recorded and
    // sent with the commit's (see RecordedAlso). A commit of none (an archive, a snapshot, `persist`) runs its
    // `also` in the transaction, statement after statement.
    const recorded = also && count > 0 && ltm.dialect === 'postgres' ? new RecordedAlso(also) : undefined;
    type Answers = Parameters<RecordedAlso['settle']>[0];
    /** `also`'s statements on `tx`: its answers, to settle the recorded statements with, on Postgres. */
    const alsoIn = (tx: SqlExecutor): Promise<Answers | undefined> | undefined =>
      recorded ? recorded.replay(tx) : (also?.(tx) as Promise<undefined> | undefined);
    // Statements that wait for no result are issued together, and on Postgres, where the transaction then
    // holds nothing but statements, COMMIT right behind them (`commitWhenIssued`): BEGIN, the statements and
    // COMMIT share one round trip. The entries are built with the ids RAM expects and sent with their reservation; in the rare
    // case another process took ids of this key meanwhile, the reservation's statement fails, which aborts
    // the transaction, and the commit is done again in order.
    // Not ambient: every statement, `also`'s too, goes through `tx`.
    const attempt = (optimistic: boolean) =>
      ltm.transaction(
        async (tx) => {
          if (optimistic) {
            // Built before any statement is issued: a throw here leaves nothing to commit.
            const built = build(ram.nextId);
            const inserted = ltm.insertReserved(tx, ram.ref.sessionKey, ram.nextId, built, retire);
            const touched = touches ? ltm.touchSession(tx, ram.ref, nowMs, idRangeOf(ram)) : undefined;
            const added = alsoIn(tx);
            inserted.catch(() => {}); // awaited below; a failure while the ids are checked is not unhandled
            touched?.catch(() => {});
            added?.catch(() => {});
            // On Postgres `also`'s statements are recorded ones: the work is statements only.
            tx.commitWhenIssued?.();
            await inserted;
            await touched;
            return { built, answers: await added };
          }
          const touched = touches ? ltm.touchSession(tx, ram.ref, nowMs, idRangeOf(ram)) : undefined;
          touched?.catch(() => {}); // awaited below; a failure while the ids are reserved is not unhandled
          const first =
            count > 0 ? await ltm.reserveIds(tx, ram.ref.sessionKey, count, ram.nextId) : ram.nextId;
          const built = build(first);
          const [answers] = await Promise.all([
            alsoIn(tx),
            touched,
            ltm.insertEntries(tx, built),
            retire ? ltm.retire(tx, ram.ref.sessionKey, retire) : undefined,
          ]);
          return { built, answers };
        },
        { ambient: false },
      );
    /**
     * On Postgres, a commit of one INSERT's worth of entries whose `also` statements fold into it is that one
     * statement, committed on its own: no BEGIN and COMMIT, one round trip, a fifth of the statements.
     */
    const inOneStatement = async () => {
      const folded = recorded ? recorded.foldable() : [];
      if (folded === undefined || !ltm.insertsInOneStatement(count)) return undefined;
      const built = build(ram.nextId);
      const statements = touches
        ? [ltm.touchSessionStatement(ram.ref, nowMs, idRangeOf(ram)), ...folded]
        : folded;
      const changes = await ltm.insertReserved(
        ctx.db,
        ram.ref.sessionKey,
        ram.nextId,
        built,
        retire,
        statements,
      );
      return {
        built,
        answers: changes.slice(statements.length - folded.length).map((rows) => ({ changes: rows })),
      };
    };
    try {
      if (recorded) {
        // `also` failing while it issued (before its first await) shows after one microtask: then nothing is
        // sent, as a transaction it failed in would have stored nothing.
        await undefined;
        if (recorded.failure) throw recorded.failure.error;
        recorded.stopRecording();
      }
      // Another writer (another process) added entries to this key since this context's last commit: some
      // may be active entries of this instance that RAM does not hold, so the stored bound stays where it is
      // for the rest of this context (a load takes it on from there).
      const redoInOrder = (error: unknown) => {
        if (!(error instanceof MemoryIdsTakenError)) throw error;
        ram.knowsStoredActive = false;
        return attempt(false);
      };
      const optimistic = count > 0;
      const committed =
        (optimistic && ltm.dialect === 'postgres' ? await inOneStatement().catch(redoInOrder) : undefined) ??
        (await attempt(optimistic).catch(redoInOrder));
      const entries = committed.built;
      if (count > 0) ram.nextId = entries[0]!.memoryId + count;
      if (touches) ram.storedActiveMs = nowMs;
      rememberCommitted(ctx, entries);
      if (recorded) {
        recorded.settle(committed.answers ?? []);
        // The commit is stored: `also` failing in what it does with the answers cannot undo it.
        await recorded.done.catch((error: unknown) =>
          ctx.logger.error(
            { err: error, sessionKey: ram.ref.sessionKey },
            'what a memory commit added failed after the commit was stored',
          ),
        );
      }
      return entries;
    } catch (error) {
      recorded?.fail(error);
      if (refusedByRows(error)) throw error;
      if (!mightSucceedLater(error)) {
        // A defect (a constraint, an SQL error, a bug that threw) fails the same way on every retry: queued,
        // it would keep memory degraded until a restart. RAM is as before the write (callers apply a commit
        // to it only once it returns), but for `knowsStoredActive`, cleared by what a redo in order learned of
        // the database.
        ctx.logger.error(
          { err: error, sessionKey: ram.ref.sessionKey },
          'memory commit failed for a reason retrying cannot fix; refused, not queued',
        );
        throw error;
      }
      enterDegraded(ctx, error);
      if (requireCommit) throw error;
    }
  }
  const firstId = ram.nextId;
  // As RAM is before this write, which is what the database is once the writes queued before it went through.
  const idRange = idRangeOf(ram);
  const built = build(firstId);
  ram.nextId += count;
  state.ramCounters.set(
    ram.ref.sessionKey,
    Math.max(state.ramCounters.get(ram.ref.sessionKey) ?? 1, ram.nextId),
  );
  // The rows as they are now: later RAM changes (tombstones, summaries) are queued as their own writes.
  const rows = built.map((entry) => ({ ...entry }));
  const pending = state.pendingWrites.get(ram.ref.sessionId) ?? { ref: ram.ref, writes: [] };
  pending.writes.push(async (tx) => {
    await ltm.touchSession(tx, ram.ref, nowMs, idRange);
    if (count > 0) {
      const first = await ltm.reserveIds(tx, ram.ref.sessionKey, count, firstId);
      if (first !== firstId)
        throw new UserInputError({
          code: ErrorCodes.conflict,
          message: `memory ids #${firstId}… of ${ram.ref.sessionKey} were taken in the database meanwhile`,
        });
    }
    await ltm.insertEntries(tx, rows);
    for (const [index, row] of rows.entries()) built[index]!.rowId = row.rowId;
    if (retire) await ltm.retire(tx, ram.ref.sessionKey, retire);
    if (also) await also(tx);
  });
  state.pendingWrites.set(ram.ref.sessionId, pending);
  scheduleRetry(ctx);
  return built;
}
