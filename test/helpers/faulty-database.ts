import type { SqlDatabase, SqlExecutor, SqlValue } from '../../src/store/index.js';
import { ErrorCodes, SystemError } from '../../src/util/index.js';

/** A write: its first keyword, or a data-modifying common table expression (Postgres's one-statement commits). */
const writeStatement =
  /^\s*(INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER)\b|^\s*WITH\b[\s\S]*\b(INSERT|UPDATE|DELETE)\b/i;

/**
 * A database whose writes fail like a full disk until `heal()`: statements that write throw what the
 * SQLite backend makes of SQLITE_FULL (a retryable STORE_UNAVAILABLE); reads keep working, as they do on a
 * full disk. Statements inside transactions are checked one by one, so a transaction fails midway.
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
  const check = (sql: string) => {
    if (!failing || !writeStatement.test(sql)) return;
    refused++;
    throw new SystemError({
      code: ErrorCodes.storeUnavailable,
      message: `the database ${inner.location} cannot be written now: database or disk is full`,
      retryable: true,
      details: { driverCode: 'SQLITE_FULL' },
    });
  };
  const wrap = (executor: SqlExecutor): SqlExecutor => ({
    dialect: executor.dialect,
    all: async <Row>(sql: string, params?: ReadonlyArray<SqlValue>) => {
      check(sql);
      return executor.all<Row>(sql, params);
    },
    get: async <Row>(sql: string, params?: ReadonlyArray<SqlValue>) => {
      check(sql);
      return executor.get<Row>(sql, params);
    },
    run: async (sql: string, params?: ReadonlyArray<SqlValue>) => {
      check(sql);
      return executor.run(sql, params);
    },
  });
  const outer = wrap(inner);
  return {
    ...outer,
    location: inner.location,
    persistent: inner.persistent,
    transaction: (work) => inner.transaction((tx) => work(wrap(tx))),
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
