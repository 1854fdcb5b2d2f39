import type { SqlDatabase, SqlExecutor, SqlValue } from '../../src/store/index.js';
import { ErrorCodes, SystemError } from '../../src/util/index.js';

/** A write: its first keyword, or a data-modifying common table expression (Postgres's one-statement commits). */
export const writeStatement =
  /^\s*(INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER)\b|^\s*WITH\b[\s\S]*\b(INSERT|UPDATE|DELETE)\b/i;

/**
 * A database whose writes fail like a full disk until `heal()`: statements that write fail with what the
 * SQLite backend makes of SQLITE_FULL (a retryable STORE_UNAVAILABLE); reads keep working, as they do on a
 * full disk. Statements inside transactions are checked one by one, so a transaction fails midway. The refused
 * statement throws SQLITE_FULL's error; on Postgres it is first replaced by one that fails on the server
 * with SQLSTATE 53100 (disk_full), so that, as with a real full disk, the server aborts the transaction and
 * answers its COMMIT with a rollback, even one sent ahead of the work's end (`commitWhenIssued`).
 */
export interface FaultyDatabase extends SqlDatabase {
  failWrites(): void;
  heal(): void;
  /** Writes refused so far. */
  readonly refused: number;
}

export function createFaultyDatabase(inner: SqlDatabase): FaultyDatabase {
  let failing = false;
  let refused = 0;
  const refuses = (sql: string) => {
    if (!failing || !writeStatement.test(sql)) return false;
    refused++;
    return true;
  };
  const fullDisk = () =>
    new SystemError({
      code: ErrorCodes.storeUnavailable,
      message: `the database ${inner.location} cannot be written now: database or disk is full`,
      retryable: true,
      details: { driverCode: 'SQLITE_FULL' },
    });
  const diskFullOnServer =
    "DO $$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = '53100'; END $$";
  const wrap = (executor: SqlExecutor): SqlExecutor => {
    // Either way the caller hears SQLITE_FULL's error (PGlite's test backend translates no SQLSTATE).
    const refusal = async (): Promise<never> => {
      if (executor.dialect === 'postgres') await executor.run(diskFullOnServer).catch(() => {});
      throw fullDisk();
    };
    return {
      dialect: executor.dialect,
      all: <Row>(sql: string, params?: ReadonlyArray<SqlValue>) =>
        refuses(sql) ? refusal() : executor.all<Row>(sql, params),
      get: <Row>(sql: string, params?: ReadonlyArray<SqlValue>) =>
        refuses(sql) ? refusal() : executor.get<Row>(sql, params),
      run: (sql: string, params?: ReadonlyArray<SqlValue>) =>
        refuses(sql) ? refusal() : executor.run(sql, params),
    };
  };
  const outer = wrap(inner);
  return {
    ...outer,
    location: inner.location,
    persistent: inner.persistent,
    transaction: (work, options) =>
      inner.transaction((tx) => {
        const commitWhenIssued = tx.commitWhenIssued?.bind(tx);
        return work({ ...wrap(tx), ...(commitWhenIssued ? { commitWhenIssued } : {}) });
      }, options),
    onClose: (hook) => inner.onClose(hook),
    close: () => inner.close(),
    failWrites: () => {
      failing = true;
    },
    heal: () => {
      failing = false;
    },
    get refused() {
      return refused;
    },
  };
}
