import { type FileHandle, open } from 'node:fs/promises';
import { resolve } from 'node:path';
import Database from 'better-sqlite3';
import type { Logger } from '../util/index.js';
import { createFifoLock, ErrorCodes, retrying, SystemError, silentLogger } from '../util/index.js';
import { createCloseHooks } from './close-hooks.js';
import type { SqlDatabase, SqlExecutor, SqlRunResult, SqlValue } from './database.js';
import { withLimitsReadAtRun } from './placeholders.js';
import { isSqliteBusy, isSqliteUnavailable } from './sql-errors.js';
import {
  createTransactionScope,
  currentTransactionScope,
  runSavepoint,
  runTransactionWork,
  type TransactionScope,
} from './transaction-scope.js';

/** Options of `createSqliteDatabase`. */
export interface SqliteDatabaseOptions {
  /** A file path, or `:memory:` for a RAM-only database. */
  path: string;
  logger?: Logger;
  /**
   * How long a write waits for another connection's write lock before failing with SQLITE_BUSY (a
   * `STORE_UNAVAILABLE`). On a WAL file the wait is on a timer, not on the event loop.
   */
  busyTimeoutMs?: number;
  /** Prepared statements kept per connection, keyed by SQL text. */
  statementCacheSize?: number;
  /**
   * Most transactions that share one commit (default 64; 1 commits each on its own). Transactions that
   * queue for the connection while one runs join its commit, each under its own SAVEPOINT, and each
   * caller's promise settles only once that commit is done: what a caller was told is committed is.
   */
  maxGroupCommit?: number;
  /**
   * WAL pages after which a commit also checkpoints them into the database file (SQLite's
   * `wal_autocheckpoint`; default 8,000, about 32 MB of WAL). The commit that crosses it copies every page
   * changed since the last checkpoint and syncs twice, so it stalls: a chat turn writes about 55 pages, and
   * at SQLite's default of 1,000 one turn in eighteen paid for it (the p99 of a chat turn); at 8,000 one in
   * about 145 does, and a page changed many times in between is copied once.
   */
  walAutocheckpointPages?: number;
  /**
   * Milliseconds between background syncs of the WAL file (`fdatasync` on Node's thread pool) while commits
   * are being written; 0 turns them off. The commit that checkpoints first syncs the WAL, on the event loop:
   * with the WAL mostly on disk already, that sync has little left to write (at one chat client a
   * checkpoint stalled its turn ~20 ms every ~270 turns without them; see docs/storage.md). Nothing becomes
   * less durable: commits reach the disk as before, some earlier. Default 50.
   */
  walSyncIntervalMs?: number;
  /**
   * The most the page cache may hold (default 64 MiB). The cache is a sixteenth of the file, never less than
   * the driver's own (16,000 KiB in better-sqlite3's build): a full-text search over a million memories
   * needs more index and row pages between searches than 16 MB hold, and each page the cache no longer holds
   * is a system call (docs/storage.md).
   */
  maxCacheBytes?: number;
  /** Commits between two fits of the page cache to the file's size (default 1,000); it is also fitted at open. */
  cacheFitEveryCommits?: number;
}

/** A SqlDatabase on better-sqlite3, with the driver exposed for SQLite-only needs (extensions, backup). */
export interface SqliteDatabase extends SqlDatabase {
  readonly dialect: 'sqlite';
  readonly driver: Database.Database;
  /**
   * Whether SQLite hands each commit to the write-ahead log in one write: true for a file with the SQLite
   * this repository's install builds (scripts/build-sqlite.mjs), false in memory (no log), with
   * better-sqlite3's stock build or with AGENTD_SQLITE_WAL_BATCH=0 (docs/storage.md).
   */
  readonly walBatching: boolean;
}

/** Asks the SQLite under `driver` whether its WAL writes are gathered a commit at a time. */
function reportsWalBatching(driver: Database.Database): boolean {
  try {
    const report = driver.prepare('SELECT agentd_wal_batch() AS report').pluck().get();
    return typeof report === 'string' && (JSON.parse(report) as { active?: unknown }).active === true;
  } catch {
    // better-sqlite3's stock SQLite has no such function.
    return false;
  }
}

/** Taken at load: a test's fake timers must not hold back the commits of the store under it. */
const afterIo = globalThis.setImmediate;
const backgroundTimer = globalThis.setTimeout;
const clearBackgroundTimer = globalThis.clearTimeout;
const multipleStatementsMessage = 'more than one statement';

/** A wait between tries for a busy lock, on the timer taken at load. */
const sleepOnBackgroundTimer = (ms: number): Promise<void> =>
  new Promise((resume) => backgroundTimer(resume, ms));
const noParams: unknown[] = [];

function toDriverParams(params: ReadonlyArray<SqlValue> | undefined): unknown[] {
  if (!params || params.length === 0) return noParams;
  let converted: unknown[] | undefined;
  for (let index = 0; index < params.length; index++) {
    const value = params[index];
    let replacement: unknown;
    // better-sqlite3 binds neither booleans nor undefined; the portable convention is INTEGER 0/1.
    if (typeof value === 'boolean') replacement = value ? 1 : 0;
    else if (value === undefined) replacement = null;
    else if (value instanceof Uint8Array && !Buffer.isBuffer(value)) {
      replacement = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    } else continue;
    converted ??= [...params];
    converted[index] = replacement;
  }
  return converted ?? (params as unknown[]);
}

/**
 * Syncs a WAL file in the background while commits are written to it: at most one `fdatasync` in flight,
 * one per interval at most, none while nothing was written. Best effort: a failure here changes nothing
 * (SQLite's own sync at the next checkpoint reports the disk's state), so it is only logged.
 */
function createWalSyncer(walPath: string, intervalMs: number, logger: Logger) {
  let timer: NodeJS.Timeout | undefined;
  let handle: FileHandle | undefined;
  let syncing: Promise<void> | undefined;
  let written = false;
  let closed = false;
  const arm = () => {
    if (timer !== undefined || closed) return;
    timer = backgroundTimer(sync, intervalMs);
    timer.unref();
  };
  function sync() {
    timer = undefined;
    if (closed || !written || syncing) return;
    written = false;
    syncing = (async () => {
      try {
        // Read-write: Windows flushes only a handle that may write.
        handle ??= await open(walPath, 'r+');
        await handle.datasync();
      } catch (error) {
        await handle?.close().catch(() => undefined);
        handle = undefined;
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
          logger.debug({ err: error, path: walPath }, 'background sync of the WAL failed');
      } finally {
        syncing = undefined;
        if (written) arm();
      }
    })();
  }
  return {
    /** A commit wrote to the WAL. */
    written(): void {
      written = true;
      if (syncing === undefined) arm();
    },
    async close(): Promise<void> {
      closed = true;
      if (timer !== undefined) clearBackgroundTimer(timer);
      await syncing;
      await handle?.close().catch(() => undefined);
    },
  };
}

/**
 * Keeps the page cache of a database file at a sixteenth of the file, never below the connection's own
 * (see `maxCacheBytes`). A RAM-only database is its cache: nothing to fit. Reading the page count takes
 * about 8 µs on a WAL file (a read transaction of its own), once per `cacheFitEveryCommits` commits.
 */
function createCacheFitter(
  driver: Database.Database,
  persistent: boolean,
  options: Pick<SqliteDatabaseOptions, 'maxCacheBytes' | 'cacheFitEveryCommits'>,
): { committed(): void } {
  if (!persistent) return { committed: () => {} };
  const maxCacheKib = Math.max(0, Math.floor((options.maxCacheBytes ?? 64 * 1024 * 1024) / 1024));
  const fitEveryCommits = Math.max(1, Math.floor(options.cacheFitEveryCommits ?? 1_000));
  const pageCount = driver.prepare('PRAGMA page_count').pluck();
  const pageKib = (driver.pragma('page_size', { simple: true }) as number) / 1024;
  // SQLite's cache_size is KiB when negative, pages when positive.
  const ownCacheSize = driver.pragma('cache_size', { simple: true }) as number;
  const ownCacheKib = ownCacheSize < 0 ? -ownCacheSize : ownCacheSize * pageKib;
  let cacheKib = ownCacheKib;
  let commitsSinceFit = 0;
  const fitToFile = () => {
    commitsSinceFit = 0;
    const fileKib = (pageCount.get() as number) * pageKib;
    const wanted = Math.min(maxCacheKib, Math.max(ownCacheKib, Math.floor(fileKib / 16)));
    if (wanted === cacheKib) return;
    cacheKib = wanted;
    driver.pragma(`cache_size = -${wanted}`);
  };
  fitToFile();
  return {
    committed() {
      if (++commitsSinceFit >= fitEveryCommits) fitToFile();
    },
  };
}

/**
 * Opens a SQLite database: WAL journal, `synchronous=NORMAL` (a committed transaction survives a process
 * crash; only an OS crash or power loss can lose the last commits), foreign keys on, a busy timeout for
 * other processes. Methods are async over the synchronous driver. A transaction holds a FIFO lock for its
 * whole duration, so statements from outside it wait instead of interleaving into it.
 *
 * Throws the driver's error when the file cannot be opened or is not a database (`SQLITE_NOTADB`,
 * `SQLITE_CANTOPEN`, …); `createStore` turns that into RAM-only mode.
 */
export function createSqliteDatabase(options: SqliteDatabaseOptions): SqliteDatabase {
  const logger = (options.logger ?? silentLogger).child({ component: 'store', backend: 'sqlite' });
  const busyTimeoutMs = options.busyTimeoutMs ?? 5_000;
  const statementCacheSize = options.statementCacheSize ?? 500;
  const persistent = options.path !== ':memory:' && options.path !== '';
  const driver = new Database(options.path, { timeout: busyTimeoutMs });
  let waitsOnTimer = false;
  try {
    if (persistent) {
      const mode = driver.pragma('journal_mode = WAL', { simple: true });
      waitsOnTimer = mode === 'wal';
      if (mode !== 'wal')
        logger.warn({ journalMode: mode, path: options.path }, 'sqlite did not switch to WAL');
    }
    driver.pragma('synchronous = NORMAL');
    driver.pragma(`wal_autocheckpoint = ${Math.max(0, Math.floor(options.walAutocheckpointPages ?? 8_000))}`);
    driver.pragma('foreign_keys = ON');
    // Transactions that share a group commit each run in a SAVEPOINT, and SQLite keeps the original of every
    // page a savepoint changes in a sub-journal, which past 64 KiB it writes to a temporary file: at 100 chat
    // clients about 5,000 page writes a second to a file deleted unread at every COMMIT. In memory instead.
    driver.pragma('temp_store = MEMORY');
    driver.pragma(`busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
    // Reading the schema makes a corrupt or foreign file fail here, at open, not at the first query.
    driver.prepare('SELECT count(*) FROM sqlite_master').get();
    // From here a busy lock is waited for on a timer (runOrWait). Without WAL a COMMIT waits for readers to
    // finish, in SQLite's handler: it cannot be retried from outside without losing the transaction.
    if (waitsOnTimer) driver.pragma('busy_timeout = 0');
  } catch (error) {
    driver.close();
    throw error;
  }

  const fitCache = createCacheFitter(driver, persistent, options);

  // Prepared once: `exec` parses and plans its text on every call, and a chat turn begins and commits two
  // transactions.
  const beginStatement = driver.prepare('BEGIN IMMEDIATE');
  const commitStatement = driver.prepare('COMMIT');
  const rollbackStatement = driver.prepare('ROLLBACK');

  const location = persistent ? options.path : ':memory:';
  /** Disk full and I/O errors become a retryable STORE_UNAVAILABLE; SQL errors keep the driver's error. */
  const translate = (error: unknown): unknown =>
    isSqliteUnavailable(error)
      ? new SystemError({
          code: ErrorCodes.storeUnavailable,
          message: `the SQLite database ${location} cannot be written now: ${(error as Error).message}`,
          retryable: true,
          cause: error,
          details: { driverCode: (error as { code: string }).code },
        })
      : error;

  const walSyncIntervalMs = Math.max(0, Math.floor(options.walSyncIntervalMs ?? 50));
  const walSyncer =
    persistent && walSyncIntervalMs > 0
      ? createWalSyncer(`${resolve(options.path)}-wal`, walSyncIntervalMs, logger)
      : undefined;

  const owner = {};
  const lock = createFifoLock();
  const maxGroupCommit = Math.max(1, Math.floor(options.maxGroupCommit ?? 64));
  /** Transactions waiting for the lock: when there are, the one holding it leaves the commit to them. */
  let transactionsWaiting = 0;
  /**
   * The open group commit: transactions whose work is done and whose changes wait for one COMMIT. Its
   * members' scopes share one SAVEPOINT counter, since they run on one SQLite transaction.
   */
  let group:
    | {
        settle: Array<(error: unknown) => void>;
        savepoints: { next: number };
      }
    | undefined;

  /**
   * Commits the open group and settles its members; with `ended`, the group's transaction is already gone
   * (rolled back by SQLite under a failing member) and its members fail with that cause. Runs with the lock
   * held.
   */
  const commitGroup = (ended?: unknown) => {
    const open = group;
    if (!open) return;
    group = undefined;
    const failure = ended === undefined ? commitNow() : ended;
    for (const settle of open.settle) settle(failure);
  };
  /** COMMITs the open SQLite transaction: undefined, or the failure, with the transaction rolled back. */
  const commitNow = (): unknown => {
    try {
      commitStatement.run();
      walSyncer?.written();
      fitCache.committed();
      return undefined;
    } catch (error) {
      if (driver.inTransaction) rollbackStatement.run();
      return translate(error);
    }
  };
  /**
   * Set while a transaction of this event-loop turn committed at once; cleared on the turn's `setImmediate`
   * (or the next turn's, when it was set in that phase). The first transaction of a turn does not wait: a
   * lone writer (one chat client, a heartbeat) would otherwise wait through the rest of the turn, and one
   * that ends in the check phase (a chat reply, whose run resumed from the previous commit's `setImmediate`)
   * through the next turn's timers and I/O poll as well. The transactions after it in the same turn, the
   * sign of several writers, wait and share one commit.
   */
  let committedAtOnceThisTurn = false;
  const endOfTurn = () => {
    committedAtOnceThisTurn = false;
  };
  /**
   * The turn's first commit goes at once. A RAM-only database writes no pages at COMMIT: nothing to share,
   * so it never waits.
   */
  const noteCommitAtOnce = () => {
    if (!persistent) return;
    committedAtOnceThisTurn = true;
    afterIo(endOfTurn);
  };
  /**
   * On a file, with the lock still held, the open group waits for the rest of this event-loop turn:
   * transactions that other callbacks of the same I/O phase start (the chat turns of every socket read in
   * it) queue for the lock and join the group, so they share one COMMIT instead of paying one each.
   */
  const scheduleGroupCommit = () => {
    afterIo(() => {
      if (transactionsWaiting > 0 && group !== undefined && group.settle.length < maxGroupCommit) {
        lock.release();
        return;
      }
      commitGroup();
      lock.release();
    });
  };
  const statements = new Map<string, Database.Statement>();
  const closeHooks = createCloseHooks(async () => {
    await walSyncer?.close();
    // Let a running transaction finish before the connection goes away.
    await lock.acquire();
    try {
      commitGroup();
      statements.clear();
      driver.close();
    } finally {
      lock.release();
    }
  });

  const statement = (sql: string): Database.Statement => {
    let prepared = statements.get(sql);
    if (prepared === undefined) {
      prepared = driver.prepare(withLimitsReadAtRun(sql));
      if (statements.size >= statementCacheSize) statements.delete(statements.keys().next().value!);
      statements.set(sql, prepared);
    }
    return prepared;
  };

  /** After a statement: one that wrote outside a transaction committed on its own (COMMIT tells the rest). */
  const autocommitted = (prepared: Database.Statement | undefined) => {
    if (!persistent || prepared?.readonly || driver.inTransaction) return;
    walSyncer?.written();
    fitCache.committed();
  };
  // A statement that returns no rows yields none, as on Postgres, instead of better-sqlite3's TypeError.
  const allNow = <Row>(sql: string, params?: ReadonlyArray<SqlValue>): Row[] => {
    const prepared = statement(sql);
    let rows: Row[] = [];
    if (prepared.reader) rows = prepared.all(...toDriverParams(params)) as Row[];
    else prepared.run(...toDriverParams(params));
    autocommitted(prepared);
    return rows;
  };
  const getNow = <Row>(sql: string, params?: ReadonlyArray<SqlValue>): Row | undefined => {
    const prepared = statement(sql);
    let row: Row | undefined;
    if (prepared.reader) row = prepared.get(...toDriverParams(params)) as Row | undefined;
    else prepared.run(...toDriverParams(params));
    autocommitted(prepared);
    return row;
  };
  const runNow = (sql: string, params?: ReadonlyArray<SqlValue>): SqlRunResult => {
    let prepared: Database.Statement;
    try {
      prepared = statement(sql);
    } catch (error) {
      // A parameterless script of several statements (migrations, setup) runs through exec, as on Postgres
      // where a parameterless query uses the simple protocol.
      if (
        (!params || params.length === 0) &&
        error instanceof RangeError &&
        error.message.includes(multipleStatementsMessage)
      ) {
        const before = driver.prepare('SELECT total_changes() AS n').pluck().get() as number;
        driver.exec(sql);
        const after = driver.prepare('SELECT total_changes() AS n').pluck().get() as number;
        autocommitted(undefined);
        return { changes: after - before };
      }
      throw error;
    }
    const { changes, lastInsertRowid } = prepared.run(...toDriverParams(params));
    autocommitted(prepared);
    return { changes, lastInsertRowid: Number(lastInsertRowid) };
  };

  /**
   * Runs now. A statement refused for another connection's lock did nothing; on a WAL file it runs again
   * after waits on a timer (1 ms doubling to 20 ms, for `busyTimeoutMs`), not in SQLite's busy handler,
   * which sleeps on the thread: every socket and timer of the process would stall with it, and a connection
   * of this same process holding the lock until its group commit (at the end of the event-loop turn) could
   * never let go, so the wait always ran to its timeout. Failures come out translated.
   */
  const runOrWait = <T>(task: () => T): T | Promise<T> => {
    try {
      return task();
    } catch (error) {
      if (!waitsOnTimer || !isSqliteBusy(error)) throw translate(error);
      return retrying(async () => task(), {
        firstDelayMs: 1,
        maxDelayMs: 20,
        forMs: busyTimeoutMs,
        retryable: isSqliteBusy,
        sleep: sleepOnBackgroundTimer,
      }).catch((failure) => {
        throw translate(failure);
      });
    }
  };
  /**
   * Runs now when nobody holds the lock or the caller is inside the holder's transaction; else queues. A
   * statement of its own commits an open group first: it must not join a commit that comes later.
   */
  const schedule = <T>(task: () => T): Promise<T> => {
    if (lock.held && currentTransactionScope(owner) === undefined) {
      return lock.acquire().then(async () => {
        try {
          commitGroup();
          return await runOrWait(task);
        } finally {
          lock.release();
        }
      });
    }
    try {
      return Promise.resolve(runOrWait(task));
    } catch (error) {
      return Promise.reject(error);
    }
  };

  /** Runs a statement of a transaction's executor, refused once that transaction has ended. */
  const inScope = <T>(
    scope: TransactionScope,
    task: (sql: string, params?: ReadonlyArray<SqlValue>) => T,
    sql: string,
    params: ReadonlyArray<SqlValue> | undefined,
  ): Promise<T> => {
    if (scope.finished)
      return Promise.reject(new Error('transaction executor used after its transaction ended'));
    try {
      return Promise.resolve(task(sql, params));
    } catch (error) {
      return Promise.reject(translate(error));
    }
  };
  // Every transaction gets an executor: its methods live on a shared prototype, so making one allocates
  // one small object instead of four closures.
  class SqliteTransactionExecutor implements SqlExecutor {
    readonly dialect = 'sqlite' as const;
    constructor(private readonly scope: TransactionScope) {}
    all<Row>(sql: string, params?: ReadonlyArray<SqlValue>): Promise<Row[]> {
      return inScope(this.scope, allNow<Row>, sql, params);
    }
    get<Row>(sql: string, params?: ReadonlyArray<SqlValue>): Promise<Row | undefined> {
      return inScope(this.scope, getNow<Row>, sql, params);
    }
    run(sql: string, params?: ReadonlyArray<SqlValue>): Promise<SqlRunResult> {
      return inScope(this.scope, runNow, sql, params);
    }
  }
  const executorFor = (scope: TransactionScope): SqlExecutor => new SqliteTransactionExecutor(scope);
  // Prepared once: `driver.pragma` compiles its statement on every call.
  const dataVersion = driver.prepare('PRAGMA data_version').pluck();
  const beginImmediate = (): void => {
    beginStatement.run();
  };

  return {
    dialect: 'sqlite',
    driver,
    location,
    persistent,
    walBatching: persistent && reportsWalBatching(driver),
    // A group waiting for its COMMIT holds the lock, so reads outside it wait for that COMMIT and never see
    // writes that may yet roll back: only a caller inside a transaction gets no version.
    readVersion: () =>
      currentTransactionScope(owner) === undefined ? (dataVersion.get() as number) : undefined,
    all: (sql, params) => schedule(() => allNow(sql, params)),
    get: (sql, params) => schedule(() => getNow(sql, params)),
    run: (sql, params) => schedule(() => runNow(sql, params)),
    async transaction(work, transactionOptions) {
      const ambient = transactionOptions?.ambient !== false;
      const outer = currentTransactionScope(owner);
      if (outer) {
        return runSavepoint(
          outer,
          async (sql) => driver.exec(sql),
          () => work(executorFor(outer)),
          ambient,
        );
      }
      if (!lock.tryAcquire()) {
        transactionsWaiting++;
        await lock.acquire();
        transactionsWaiting--;
      }
      // SQLite's own rollback on some errors may have ended a group's transaction under it.
      if (group && !driver.inTransaction) commitGroup();
      const joined = group;
      const scope: TransactionScope = joined
        ? { ...createTransactionScope(owner, driver), savepoints: joined.savepoints }
        : createTransactionScope(owner, driver);
      let result: Awaited<ReturnType<typeof work>>;
      try {
        if (joined) {
          // Only this transaction's changes roll back when it fails; the group's stay.
          result = await runSavepoint(
            scope,
            async (sql) => driver.exec(sql),
            () => work(executorFor(scope)),
            ambient,
          );
        } else {
          const begun = runOrWait(beginImmediate);
          if (begun !== undefined) await begun;
          try {
            result = await runTransactionWork(scope, ambient, work, executorFor(scope));
          } catch (error) {
            if (driver.inTransaction) rollbackStatement.run();
            throw error;
          }
        }
      } catch (error) {
        scope.finished = true;
        const failure = translate(error);
        if (group && !driver.inTransaction) commitGroup(failure);
        if (group && transactionsWaiting === 0) commitGroup();
        lock.release();
        throw failure;
      }
      scope.finished = true;
      if (group === undefined && transactionsWaiting === 0 && !(persistent && committedAtOnceThisTurn)) {
        // Alone, and the turn's first commit (or a RAM-only database's): it commits at once, with no group
        // to settle.
        noteCommitAtOnce();
        const failure = commitNow();
        lock.release();
        if (failure !== undefined) throw failure;
        return result;
      }
      const open = group ?? { settle: [], savepoints: scope.savepoints };
      group = open;
      const committed = new Promise<void>((resolve, reject) => {
        open.settle.push((failure) => (failure === undefined ? resolve() : reject(failure)));
      });
      if (open.settle.length >= maxGroupCommit) {
        commitGroup();
        lock.release();
      } else if (transactionsWaiting > 0) {
        // The next transaction joins the group; the last of them commits for all.
        lock.release();
      } else if (persistent && committedAtOnceThisTurn) {
        scheduleGroupCommit();
      } else {
        noteCommitAtOnce();
        commitGroup();
        lock.release();
      }
      await committed;
      return result;
    },
    onClose: closeHooks.add,
    close: closeHooks.close,
  };
}
