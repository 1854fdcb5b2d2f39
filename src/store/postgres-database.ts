import type { Duplex } from 'node:stream';
import type pg from 'pg';
import type { Logger } from '../util/index.js';
import { ErrorCodes, isStoreUnavailable, SystemError, silentLogger } from '../util/index.js';
import { createCloseHooks } from './close-hooks.js';
import type { SqlDatabase, SqlRunResult, SqlValue, TransactionExecutor } from './database.js';
import { pgDriver } from './pg-driver.js';
import { rewritePlaceholders } from './placeholders.js';
import {
  createTransactionScope,
  currentTransactionScope,
  runSavepoint,
  runTransactionWork,
  type TransactionScope,
} from './transaction-scope.js';

/** Options of `createPostgresDatabase`. */
export interface PostgresDatabaseOptions {
  connectionString: string;
  /** Sets `search_path` on every connection; tests use it to isolate themselves in a schema. */
  schema?: string;
  /**
   * Server settings for every connection (sent as `-c name=value` at connect), e.g.
   * `{ statement_timeout: 30000 }`. Tests use `synchronous_commit: 'off'` to skip the fsync per commit.
   */
  settings?: Record<string, string | number>;
  poolSize?: number;
  connectTimeoutMs?: number;
  /** How long an idle pooled connection stays open. */
  idleTimeoutMs?: number;
  /**
   * Distinct statements (by SQL text) that run as named prepared statements once they have run twice
   * (default 256; 0 turns it off). Postgres then parses and analyses each on a connection once, not on
   * every call: a chat turn runs the same twenty or so statements each time. Texts past the limit (an IN
   * list of a new length, say) keep running unnamed.
   */
  maxPreparedStatements?: number;
  logger?: Logger;
}

/** A SqlDatabase on a node-postgres pool, with the pool exposed for Postgres-only needs (LISTEN/NOTIFY). */
export interface PostgresDatabase extends SqlDatabase {
  readonly dialect: 'postgres';
  readonly pool: pg.Pool;
  /** Whether the caller runs inside one of this database's transactions (its reads see its own writes). */
  inTransaction(): boolean;
}

const int8Oid = 20;
const numericOid = 1700;
const schemaPattern = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const settingNamePattern = /^[A-Za-z_][A-Za-z0-9_.]*$/;
const settingValuePattern = /^[A-Za-z0-9_.:-]+$/;

function startupOptions(
  schema: string | undefined,
  settings: Record<string, string | number>,
): string | undefined {
  const entries = Object.entries(settings);
  if (schema !== undefined) entries.push(['search_path', schema]);
  for (const [name, value] of entries) {
    if (!settingNamePattern.test(name) || !settingValuePattern.test(String(value))) {
      throw new SystemError({
        code: ErrorCodes.invalidConfig,
        message: `invalid Postgres setting ${name}=${value}`,
      });
    }
  }
  return entries.length > 0 ? entries.map(([name, value]) => `-c ${name}=${value}`).join(' ') : undefined;
}

/** BIGINT and NUMERIC (what COUNT and SUM return) come back as JS numbers, as on SQLite. */
const typeParsers = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if ((oid === int8Oid || oid === numericOid) && format !== 'binary')
      return (value: string) => Number(value);
    return pgDriver().types.getTypeParser(oid, format as 'text');
  },
} as pg.CustomTypesConfig;

const networkErrorCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EPIPE',
  'EAI_AGAIN',
]);
// admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections
// Terminated or shut down, disk full, too many connections, I/O error, connection exceptions.
const unavailableSqlStates = new Set([
  '57P01',
  '57P02',
  '57P03',
  '53100',
  '53300',
  '58030',
  '08000',
  '08003',
  '08006',
]);

/** The URL with its password removed, safe for logs and `/health`. */
export function redactConnectionString(connectionString: string): string {
  try {
    const url = new URL(connectionString);
    if (url.password) url.password = '';
    url.searchParams.delete('password');
    return url.toString().replace(/:@/, '@');
  } catch {
    return 'postgres (unparseable connection string)';
  }
}

function isConnectionFailure(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (networkErrorCodes.has(code) || unavailableSqlStates.has(code)))
    return true;
  const message = (error as { message?: unknown }).message;
  return (
    typeof message === 'string' &&
    /Connection terminated|timeout exceeded when trying to connect|connection error|Connection refused/i.test(
      message,
    )
  );
}

function toDriverParams(params: ReadonlyArray<SqlValue> | undefined): unknown[] | undefined {
  if (!params || params.length === 0) return undefined;
  return params.map((value) => {
    if (typeof value === 'boolean') return value ? 1 : 0;
    if (typeof value === 'bigint') return value.toString();
    if (value === undefined) return null;
    if (value instanceof Uint8Array && !Buffer.isBuffer(value)) {
      return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    }
    return value;
  });
}

const writeCommands = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);

/** Rows written, as SQLite counts them: node-postgres's rowCount also counts rows a SELECT returned. */
function changesOf(result: pg.QueryResult | pg.QueryResult[]): number {
  // A parameterless multi-statement script (simple protocol) returns one result per statement.
  const parts = Array.isArray(result) ? result : [result];
  let changes = 0;
  for (const part of parts) if (writeCommands.has(part.command)) changes += part.rowCount ?? 0;
  return changes;
}

/**
 * Holds a transaction's socket writes until the current burst of synchronous code is over, so statements
 * issued together (BEGIN and the first statement, or several a transaction pipelines) leave in one write:
 * each write to a loopback socket costs tens of microseconds of kernel time. node-postgres writes every
 * protocol message separately and exposes its socket only as `connection.stream`; without it, writes
 * simply go out one by one.
 */
function corkUntilNextTick(client: pg.PoolClient): void {
  const stream = (client as unknown as { connection?: { stream?: Duplex } }).connection?.stream;
  if (!stream || stream.writableCorked > 0) return;
  stream.cork();
  process.nextTick(() => stream.uncork());
}

/**
 * Rewrites `?` placeholders and names statements seen twice, up to `maxNamed` texts. A text keeps its name
 * for the database's lifetime, so every connection that prepared it agrees on what the name means; texts
 * not named are remembered in a bounded recency list only to count their second use.
 */
function createStatementNamer(maxNamed: number, maxUnnamed = 1_000) {
  const named = new Map<string, { name: string; text: string }>();
  const unnamed = new Map<string, { text: string; uses: number }>();
  return (sql: string, values: unknown[]): pg.QueryConfig => {
    const prepared = named.get(sql);
    if (prepared) return { name: prepared.name, text: prepared.text, values };
    let seen = unnamed.get(sql);
    if (seen === undefined) {
      seen = { text: rewritePlaceholders(sql), uses: 0 };
      if (unnamed.size >= maxUnnamed) unnamed.delete(unnamed.keys().next().value!);
      unnamed.set(sql, seen);
    }
    seen.uses++;
    if (seen.uses >= 2 && named.size < maxNamed) {
      unnamed.delete(sql);
      const statement = { name: `agentd_${named.size + 1}`, text: seen.text };
      named.set(sql, statement);
      return { name: statement.name, text: statement.text, values };
    }
    return { text: seen.text, values };
  };
}

/**
 * Opens a Postgres pool. The pool connects lazily: an unreachable server surfaces on the first query as a
 * retryable SystemError `STORE_UNAVAILABLE` (SQL errors keep the driver's error and its SQLSTATE `code`).
 */
export function createPostgresDatabase(options: PostgresDatabaseOptions): PostgresDatabase {
  const location = redactConnectionString(options.connectionString);
  const logger = (options.logger ?? silentLogger).child({ component: 'store', backend: 'postgres' });
  if (options.schema !== undefined && !schemaPattern.test(options.schema)) {
    throw new SystemError({
      code: ErrorCodes.invalidConfig,
      message: `invalid Postgres schema name "${options.schema}"`,
    });
  }
  const connectionOptions = startupOptions(options.schema, options.settings ?? {});
  const driver = pgDriver();
  const pool = new driver.Pool({
    connectionString: options.connectionString,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
    idleTimeoutMillis: options.idleTimeoutMs ?? 10_000,
    types: typeParsers,
    // A statement issued while another is in flight goes out at once instead of waiting for its result:
    // a transaction's BEGIN travels with its first statement, and statements a transaction issues
    // together share a round trip. Responses still come back in order, one per statement.
    pipeline: true,
    ...(connectionOptions ? { options: connectionOptions } : {}),
  });
  // An idle client losing its connection emits on the pool; unhandled, it would crash the process.
  pool.on('error', (error) => logger.warn({ err: error, location }, 'idle postgres connection failed'));

  const owner = {};
  const prepare = createStatementNamer(options.maxPreparedStatements ?? 256);

  const translateError = (error: unknown): unknown => {
    if (!isConnectionFailure(error)) return error;
    return new SystemError({
      code: ErrorCodes.storeUnavailable,
      message: `Postgres at ${location} is unavailable: ${(error as Error).message}`,
      retryable: true,
      cause: error,
    });
  };

  type Answer = pg.QueryResult | pg.QueryResult[];

  /**
   * Sends one statement and settles `resolve`/`reject` with its answer, without a promise of its own (one
   * layer per statement fewer). The driver's Query is built from the text, with the prepared name set on it
   * afterwards: given a config object, node-postgres copies it property by property (through their
   * descriptors) for every statement, a few microseconds each, a dozen times per chat turn. Without values
   * node-postgres uses the simple protocol, which accepts multi-statement scripts.
   */
  const submit = (
    client: pg.PoolClient,
    sql: string,
    values: unknown[] | undefined,
    resolve: (answer: Answer) => void,
    reject: (error: unknown) => void,
  ): void => {
    const prepared = values ? prepare(sql, values) : undefined;
    const statement = new driver.Query(prepared?.text ?? sql, values, (error, result) => {
      if (error) reject(translateError(error));
      else resolve(result as unknown as Answer);
    });
    if (prepared?.name !== undefined) (statement as { name?: string }).name = prepared.name;
    client.query(statement);
  };

  /**
   * A statement outside any transaction. While others wait for the pool, its connection goes back as soon
   * as the statement is sent, not when it is answered: outside a transaction the statement leaves no state
   * on the connection that a statement pipelined behind it could see, and holding the connection for the
   * round trip only made the waiting transactions wait longer (a chat turn's session read, say). With no one
   * waiting the connection is held until the answer: nothing would gain from it, and the pool would
   * otherwise count a connection with a statement in flight as idle (to hand out first, or to close).
   * Either way the statement is sent in the pool's callback, and a held connection has a listener for its
   * 'error', so no 'error' comes while no listener is on it.
   */
  const queryOnPool = (sql: string, values: unknown[] | undefined) =>
    new Promise<Answer>((resolve, reject) => {
      pool.connect((error, client, release) => {
        if (error || !client) {
          reject(translateError(error ?? new Error('connection error: the pool gave no client')));
          return;
        }
        corkUntilNextTick(client);
        if (pool.waitingCount > 0) {
          try {
            submit(client, sql, values, resolve, reject);
          } catch (submitError) {
            release(submitError as Error);
            reject(translateError(submitError));
            return;
          }
          release();
          return;
        }
        let lost: Error | undefined;
        const onConnectionError = (connectionError: Error) => {
          lost = connectionError;
        };
        client.on('error', onConnectionError);
        const settle = (failure: unknown) => {
          client.off('error', onConnectionError);
          release(
            lost ??
              (failure !== undefined && (isConnectionFailure(failure) || isStoreUnavailable(failure))
                ? (failure as Error)
                : undefined),
          );
        };
        try {
          submit(
            client,
            sql,
            values,
            (answer) => {
              settle(undefined);
              resolve(answer);
            },
            (queryError) => {
              settle(queryError);
              reject(queryError);
            },
          );
        } catch (submitError) {
          settle(submitError);
          reject(translateError(submitError));
        }
      });
    });

  /** The COMMIT of a transaction that sent it ahead of its work's end (`commitWhenIssued`), by connection. */
  const commitsAhead = new WeakMap<pg.PoolClient, Promise<Answer>>();

  const query = (
    client: pg.Pool | pg.PoolClient,
    sql: string,
    params: ReadonlyArray<SqlValue> | undefined,
  ): Promise<Answer> => {
    const values = toDriverParams(params);
    if (client === pool) return queryOnPool(sql, values);
    // Nothing may follow a COMMIT sent ahead: it would run outside the transaction.
    if (commitsAhead.has(client as pg.PoolClient))
      throw new SystemError({
        code: ErrorCodes.internal,
        message: 'a statement was issued after its transaction had sent COMMIT (commitWhenIssued)',
      });
    corkUntilNextTick(client as pg.PoolClient);
    return new Promise<Answer>((resolve, reject) =>
      submit(client as pg.PoolClient, sql, values, resolve, reject),
    );
  };

  const rowsOf = (result: pg.QueryResult | pg.QueryResult[]): Record<string, unknown>[] =>
    Array.isArray(result) ? (result.at(-1)?.rows ?? []) : result.rows;

  /** Statements issued on the database from inside a transaction's async chain join that transaction. */
  const target = (): pg.Pool | pg.PoolClient =>
    currentTransactionScope<pg.PoolClient>(owner)?.connection ?? pool;

  const executorFor = (
    scope: TransactionScope<pg.PoolClient>,
    commitWhenIssued?: () => void,
  ): TransactionExecutor => {
    const connection = () => {
      if (scope.finished) throw new Error('transaction executor used after its transaction ended');
      return scope.connection;
    };
    return {
      ...(commitWhenIssued ? { commitWhenIssued } : {}),
      dialect: 'postgres',
      all: async <Row>(sql: string, params?: ReadonlyArray<SqlValue>) =>
        rowsOf(await query(connection(), sql, params)) as Row[],
      get: async <Row>(sql: string, params?: ReadonlyArray<SqlValue>) =>
        rowsOf(await query(connection(), sql, params))[0] as Row | undefined,
      run: async (sql: string, params?: ReadonlyArray<SqlValue>): Promise<SqlRunResult> => ({
        changes: changesOf(await query(connection(), sql, params)),
      }),
    };
  };

  const closeHooks = createCloseHooks(() => pool.end());
  return {
    dialect: 'postgres',
    pool,
    location: options.schema ? `${location}#${options.schema}` : location,
    persistent: true,
    inTransaction: () => currentTransactionScope(owner) !== undefined,
    all: async <Row>(sql: string, params?: ReadonlyArray<SqlValue>) =>
      rowsOf(await query(target(), sql, params)) as Row[],
    get: async <Row>(sql: string, params?: ReadonlyArray<SqlValue>) =>
      rowsOf(await query(target(), sql, params))[0] as Row | undefined,
    run: async (sql, params) => ({ changes: changesOf(await query(target(), sql, params)) }),
    async transaction(work, transactionOptions) {
      const ambient = transactionOptions?.ambient !== false;
      const outer = currentTransactionScope<pg.PoolClient>(owner);
      if (outer) {
        return runSavepoint(
          outer,
          (sql) => query(outer.connection, sql, undefined),
          () => work(executorFor(outer)),
          ambient,
        );
      }
      let broken: Error | undefined;
      // A checked-out client whose connection is terminated emits 'error'; the pool only listens on idle
      // ones, and an unheard 'error' would take the whole process down. The next query fails with it anyway.
      const onConnectionError = (error: Error) => {
        broken = error;
        logger.warn({ err: error, location }, 'postgres connection lost inside a transaction');
      };
      let client: pg.PoolClient;
      try {
        // The listener goes on inside the pool's callback, not after an `await`: a connection handed over
        // by a query that just finished may have its termination notice in the same packet, parsed before
        // any promise continuation runs.
        client = await new Promise<pg.PoolClient>((resolve, reject) => {
          pool.connect((error, connected) => {
            if (error || !connected) {
              reject(error ?? new Error('connection error: the pool gave no client'));
              return;
            }
            connected.on('error', onConnectionError);
            resolve(connected);
          });
        });
      } catch (error) {
        throw translateError(error);
      }
      const scope = createTransactionScope(owner, client);
      let commitAhead: Promise<Answer> | undefined;
      const commitWhenIssued = () => {
        if (commitAhead || scope.finished) return;
        commitAhead = query(client, 'COMMIT', undefined);
        commitAhead.catch(() => {});
        commitsAhead.set(client, commitAhead);
      };
      let released = false;
      const release = () => {
        scope.finished = true;
        commitsAhead.delete(client);
        client.off('error', onConnectionError);
        released = true;
        client.release(broken);
      };
      try {
        // Not awaited: the work's first statement is pipelined behind it. Its result is awaited before
        // COMMIT; BEGIN fails only with the connection, which fails the statements behind it too.
        const began = query(client, 'BEGIN', undefined);
        began.catch(() => {});
        let result: Awaited<ReturnType<typeof work>>;
        try {
          result = await runTransactionWork(scope, ambient, work, executorFor(scope, commitWhenIssued));
          await began;
        } catch (error) {
          if (commitAhead) {
            // COMMIT has gone out: Postgres ended the transaction with it, as a commit, or as a rollback
            // when a statement failed (the usual cause of the work's failure).
            const answer = await commitAhead.catch(() => undefined);
            if (answer && !Array.isArray(answer) && answer.command === 'COMMIT')
              logger.error(
                { err: error, location },
                'a transaction failed after it sent COMMIT ahead (commitWhenIssued); its statements are committed',
              );
            throw error;
          }
          try {
            await query(client, 'ROLLBACK', undefined);
          } catch (rollbackError) {
            // The connection is unusable; destroy it rather than return it to the pool mid-transaction.
            broken = rollbackError as Error;
          }
          throw error;
        }
        // COMMIT goes out only now that the work has resolved, unless it went ahead. While others wait for
        // the pool the connection goes back with COMMIT in flight: whatever ends the transaction (COMMIT, its
        // error, or its answer ROLLBACK), the connection is outside any transaction afterwards, and the next
        // transaction's BEGIN and statements are pipelined behind it, often in the same socket write,
        // instead of waiting for the commit's flush. This transaction still reports success only on
        // COMMIT's answer; a connection lost meanwhile fails the statements queued behind it as well.
        const committing = commitAhead ?? query(client, 'COMMIT', undefined);
        committing.catch(() => {});
        if (pool.waitingCount > 0) release();
        const committed = await committing;
        // Postgres answers COMMIT of a transaction that a failed statement aborted with ROLLBACK, not an
        // error: work that caught that statement's error must not be told its writes are stored.
        if (!Array.isArray(committed) && committed.command === 'ROLLBACK')
          throw new SystemError({
            code: ErrorCodes.storeUnavailable,
            message:
              'the transaction was rolled back: a statement in it failed and its error was handled inside the transaction',
            retryable: true,
          });
        return result;
      } catch (error) {
        broken ??= isConnectionFailure(error) || isStoreUnavailable(error) ? (error as Error) : undefined;
        throw error;
      } finally {
        if (!released) release();
      }
    },
    onClose: closeHooks.add,
    close: closeHooks.close,
  };
}
