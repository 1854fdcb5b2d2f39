/**
 * The SQL access layer every persistent aggregate is written against. Two dialects:
 * `sqlite` (better-sqlite3, the embedded default, also used in RAM-only mode with `:memory:`) and
 * `postgres` (node-postgres pool, or PGlite in tests where no server is reachable).
 *
 * Portable SQL rules (so one query serves both dialects where possible):
 * - placeholders are always `?`; the postgres backend rewrites them to `$1, $2, …`.
 * - timestamps are epoch milliseconds in BIGINT/INTEGER columns; booleans are INTEGER 0/1; JSON is TEXT.
 * - BIGINT columns come back as JS numbers on both backends.
 * - `INSERT … ON CONFLICT … DO UPDATE` and `RETURNING` work on both.
 * Where the dialects differ (full-text search, SKIP LOCKED, LISTEN/NOTIFY), branch on `db.dialect`.
 */
export type SqlDialect = 'sqlite' | 'postgres';

export type SqlValue = string | number | bigint | boolean | null | Uint8Array;

export interface SqlRunResult {
  /** Rows inserted, updated or deleted. */
  changes: number;
  /**
   * SQLite only, and only meaningful after an INSERT: the rowid of the last row it made (an INSERT of several
   * rows gives them consecutive rowids in the order of its VALUES, so this names all of them). Postgres has
   * none: use RETURNING there.
   */
  lastInsertRowid?: number;
}

export interface SqlExecutor {
  readonly dialect: SqlDialect;
  all<Row = Record<string, unknown>>(sql: string, params?: ReadonlyArray<SqlValue>): Promise<Row[]>;
  get<Row = Record<string, unknown>>(sql: string, params?: ReadonlyArray<SqlValue>): Promise<Row | undefined>;
  run(sql: string, params?: ReadonlyArray<SqlValue>): Promise<SqlRunResult>;
}

export interface TransactionOptions {
  /**
   * Default true: the transaction is found from its async chain, so code inside it that calls the database
   * directly joins it. That lookup is an AsyncLocalStorage, and while one runs Node calls a hook for every
   * promise the whole process creates, inside the transaction or not (about 3 % of a chat server's busy
   * time at 100 clients). With `ambient: false` nothing is tracked: `work` passes `tx` to everything it calls, and a
   * direct call on the database from inside it is not part of the transaction (on SQLite it waits for the
   * transaction to end, which never comes; on Postgres it runs on another connection). A transaction opened
   * inside an ambient one still nests in it as a savepoint.
   */
  ambient?: boolean;
}

/** What `transaction(work)` hands its work. */
export interface TransactionExecutor extends SqlExecutor {
  /**
   * Says that every statement of the transaction has been issued and that the work can fail from now on
   * only because one of them fails on the server. Postgres then sends COMMIT right behind them, so they and
   * COMMIT share a round trip instead of COMMIT waiting for their answers; a statement that fails aborts the
   * transaction, and Postgres answers that COMMIT with a rollback. The transaction still settles only once
   * COMMIT is answered, and a statement issued afterwards fails.
   *
   * Only for work whose every check is in its statements: a failure in JavaScript after COMMIT has gone out
   * cannot undo what the statements wrote (it is logged as an error). Absent where COMMIT costs no round
   * trip of its own (SQLite) and in nested transactions.
   */
  commitWhenIssued?(): void;
}

/**
 * The SQL connection every store writes through, one interface for SQLite and Postgres (`dialect` tells which).
 */
export interface SqlDatabase extends SqlExecutor {
  /**
   * Runs `work` in one transaction on one connection; commits when it resolves, rolls back when it throws.
   * On SQLite, other statements wait until the transaction ends, so an `await` inside cannot interleave
   * foreign writes into it.
   *
   * `work` must only do database work through `tx`. On SQLite, transactions queued behind a running one
   * share its COMMIT (each in its own savepoint), and a caller's promise settles after that COMMIT: a `work`
   * that awaits an earlier transaction's promise, or a lock an earlier caller holds around its transaction,
   * never finishes, and one that awaits anything slow holds up every transaction of its group.
   *
   * By default a statement or transaction issued on this database (not on `tx`) from inside `work`'s async
   * chain still joins the transaction, a safety net for code that does not pass `tx` on. See
   * `TransactionOptions.ambient` for the price of that net and how to go without it.
   */
  transaction<T>(work: (tx: TransactionExecutor) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /** Where the data lives, safe to print: a file path, `:memory:`, or a URL with the password removed. */
  readonly location: string;
  /** False for RAM-only databases: data is gone when the process exits. */
  readonly persistent: boolean;
  /**
   * A number that stays the same while no other connection commits to the database: what a caller read
   * outside a transaction may be served from its own cache while this does not change, its own writes
   * invalidating that cache. Undefined inside a transaction (whose reads see its uncommitted writes) and
   * where it cannot be known: Postgres, whose pool's connections are all "other". SQLite's `data_version`.
   */
  readVersion?(): number | undefined;
  /**
   * Runs `hook` once `close` is called, before the connection goes: `close` resolves after every hook has
   * settled. For what lives as long as the connection and must end first, such as another connection to the
   * same SQLite file, which would make its `-wal` and `-shm` files again after the last one closed. A hook
   * registered once `close` was called runs at once.
   */
  onClose(hook: () => Promise<void> | void): void;
  /**
   * Closes the connection once; every call, the first's and any made while or after it runs, resolves only
   * when the connection is gone, so a caller may remove the files as soon as its own call resolves.
   */
  close(): Promise<void>;
}
