import { AsyncLocalStorage } from 'node:async_hooks';
import { createFifoLock, type FifoLock } from '../util/index.js';

/**
 * Tracks which transactions the current async call chain is inside, per database. A statement issued on
 * the database object (not the `tx` executor) from inside `transaction(work)` must join that transaction:
 * on SQLite waiting for the lock would deadlock, on Postgres running on another pooled connection could
 * block on row locks the transaction holds. One AsyncLocalStorage serves all databases; each database is a
 * key (its `owner` token) in an immutable map.
 */
export interface TransactionScope<Connection = unknown> {
  readonly owner: object;
  readonly connection: Connection;
  /** Serialises sibling nested transactions so their SAVEPOINTs cannot interleave. */
  readonly nestLock: FifoLock;
  /** Shared by all scopes of one connection: makes SAVEPOINT names unique. */
  readonly savepoints: { next: number };
  /** Set when the transaction ended; detached promises that outlive it must not use its connection. */
  finished: boolean;
}

export function createTransactionScope<Connection>(
  owner: object,
  connection: Connection,
): TransactionScope<Connection> {
  return { owner, connection, nestLock: createFifoLock(), savepoints: { next: 1 }, finished: false };
}

const scopes = new AsyncLocalStorage<ReadonlyMap<object, TransactionScope>>();

export function currentTransactionScope<Connection>(owner: object): TransactionScope<Connection> | undefined {
  const scope = scopes.getStore()?.get(owner);
  return scope && !scope.finished ? (scope as TransactionScope<Connection>) : undefined;
}

/**
 * Scopes whose work has not settled. While the storage is enabled Node runs a hook on every promise the
 * process makes, not only in transactions (about a quarter of the engage loop's CPU in memory), so it is
 * disabled whenever no transaction runs; `run` enables it again. A promise that outlives its transaction
 * then reads no scope, as it would read a finished one.
 */
let runningScopes = 0;

function scopeSettled(): void {
  if (--runningScopes === 0) scopes.disable();
}

/** Runs `work(argument)` inside `scope`; the argument saves callers a closure per transaction. */
function runInTransactionScope<T, A = undefined>(
  scope: TransactionScope,
  work: (argument: A) => Promise<T>,
  argument?: A,
): Promise<T> {
  const next = new Map(scopes.getStore());
  next.set(scope.owner, scope);
  runningScopes++;
  let running: Promise<T>;
  try {
    running = scopes.run(next, work, argument as A);
  } catch (error) {
    scopeSettled();
    throw error;
  }
  return running.then(
    (result) => {
      scopeSettled();
      return result;
    },
    (error: unknown) => {
      scopeSettled();
      throw error;
    },
  );
}

/**
 * Runs a transaction's `work(argument)`: inside `scope` when the transaction is ambient, directly when not
 * (`TransactionOptions.ambient`), so no AsyncLocalStorage is switched on for it.
 */
export function runTransactionWork<T, A = undefined>(
  scope: TransactionScope,
  ambient: boolean,
  work: (argument: A) => Promise<T>,
  argument?: A,
): Promise<T> {
  return ambient ? runInTransactionScope(scope, work, argument) : work(argument as A);
}

/**
 * Runs nested work under a SAVEPOINT so an inner failure rolls back only the inner part. Ambient nested work
 * gets its own child scope, so a transaction nested inside it gets its own SAVEPOINT in turn.
 */
export async function runSavepoint<Connection, T>(
  scope: TransactionScope<Connection>,
  execute: (sql: string) => Promise<unknown>,
  work: () => Promise<T>,
  ambient = true,
): Promise<T> {
  await scope.nestLock.acquire();
  const child: TransactionScope<Connection> = { ...scope, nestLock: createFifoLock(), finished: false };
  const name = `agentd_sp_${scope.savepoints.next++}`;
  try {
    await execute(`SAVEPOINT ${name}`);
    try {
      const result = await runTransactionWork(child, ambient, work);
      await execute(`RELEASE SAVEPOINT ${name}`);
      return result;
    } catch (error) {
      try {
        await execute(`ROLLBACK TO SAVEPOINT ${name}`);
        await execute(`RELEASE SAVEPOINT ${name}`);
      } catch {
        // The savepoint is gone when the error ended the whole transaction (SQLite rolls back on a full
        // disk or an I/O error; a connection can drop): the cause is the error worth reporting.
      }
      throw error;
    }
  } finally {
    child.finished = true;
    scope.nestLock.release();
  }
}
