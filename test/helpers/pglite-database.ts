import { PGlite } from '@electric-sql/pglite';
import { createCloseHooks } from '../../src/store/close-hooks.js';
import type { SqlDatabase, SqlExecutor, SqlRunResult, SqlValue } from '../../src/store/index.js';
import { createPlaceholderCache } from '../../src/store/placeholders.js';
import {
  createTransactionScope,
  currentTransactionScope,
  runSavepoint,
  runTransactionWork,
  type TransactionScope,
} from '../../src/store/transaction-scope.js';
import { createFifoLock, type FifoLock } from '../../src/util/index.js';

/**
 * PGlite (Postgres compiled to WebAssembly) stands in for a Postgres server in tests where none is
 * reachable. One instance is one connection, so all databases on it share one lock, and each database
 * re-points `search_path` at its own schema before it runs.
 */
export interface PgliteInstance {
  readonly pg: PGlite;
  readonly lock: FifoLock;
  currentSchema: string | undefined;
}

const numberParser = (value: string) => Number(value);

export async function createPgliteInstance(): Promise<PgliteInstance> {
  // BIGINT and NUMERIC come back as JS numbers, as the `pg` backend does.
  const pg = await PGlite.create({ parsers: { 20: numberParser, 1700: numberParser } });
  return { pg, lock: createFifoLock(), currentSchema: undefined };
}

function toDriverParams(params: ReadonlyArray<SqlValue> | undefined): unknown[] | undefined {
  if (!params || params.length === 0) return undefined;
  return params.map((value) => {
    if (typeof value === 'boolean') return value ? 1 : 0;
    if (typeof value === 'bigint') return value.toString();
    if (value === undefined) return null;
    return value;
  });
}

export interface PgliteDatabaseOptions {
  instance: PgliteInstance;
  /** Must exist already; statements run with `search_path` set to it. */
  schema: string;
  /** Runs after the database is closed, e.g. to drop the schema. */
  onClose?: () => Promise<void>;
}

export function createPgliteDatabase(options: PgliteDatabaseOptions): SqlDatabase {
  const { instance, schema } = options;
  const owner = {};
  const rewrite = createPlaceholderCache();
  let closed = false;
  const closeHooks = createCloseHooks(async () => {
    await instance.lock.acquire();
    closed = true;
    instance.lock.release();
    await options.onClose?.();
  });

  const ensureSchema = async () => {
    if (instance.currentSchema === schema) return;
    await instance.pg.exec(`SET search_path TO ${schema}`);
    instance.currentSchema = schema;
  };

  const execute = async (sql: string, params: ReadonlyArray<SqlValue> | undefined) => {
    const values = toDriverParams(params);
    if (values) {
      const result = await instance.pg.query<Record<string, unknown>>(rewrite(sql), values);
      return { rows: result.rows, changes: result.affectedRows ?? 0 };
    }
    // Parameterless statements may be multi-statement scripts, as with `pg`'s simple protocol.
    const results = await instance.pg.exec(sql);
    const changes = results.reduce((sum, part) => sum + (part.affectedRows ?? 0), 0);
    return { rows: (results.at(-1)?.rows ?? []) as Record<string, unknown>[], changes };
  };

  const exclusive = async <T>(task: () => Promise<T>): Promise<T> => {
    if (closed) throw new Error(`PGlite database ${schema} is closed`);
    if (currentTransactionScope(owner)) return task();
    await instance.lock.acquire();
    try {
      await ensureSchema();
      return await task();
    } finally {
      instance.lock.release();
    }
  };

  const executorFor = (scope: TransactionScope): SqlExecutor => {
    const guarded = async <T>(task: () => Promise<T>) => {
      if (scope.finished) throw new Error('transaction executor used after its transaction ended');
      return task();
    };
    return {
      dialect: 'postgres',
      all: <Row>(sql: string, params?: ReadonlyArray<SqlValue>) =>
        guarded(async () => (await execute(sql, params)).rows as Row[]),
      get: <Row>(sql: string, params?: ReadonlyArray<SqlValue>) =>
        guarded(async () => (await execute(sql, params)).rows[0] as Row | undefined),
      run: (sql: string, params?: ReadonlyArray<SqlValue>) =>
        guarded(async (): Promise<SqlRunResult> => ({ changes: (await execute(sql, params)).changes })),
    };
  };

  return {
    dialect: 'postgres',
    location: `pglite#${schema}`,
    persistent: false,
    all: <Row>(sql: string, params?: ReadonlyArray<SqlValue>) =>
      exclusive(async () => (await execute(sql, params)).rows as Row[]),
    get: <Row>(sql: string, params?: ReadonlyArray<SqlValue>) =>
      exclusive(async () => (await execute(sql, params)).rows[0] as Row | undefined),
    run: (sql, params) => exclusive(async () => ({ changes: (await execute(sql, params)).changes })),
    async transaction(work, transactionOptions) {
      const ambient = transactionOptions?.ambient !== false;
      const outer = currentTransactionScope(owner);
      if (outer)
        return runSavepoint(
          outer,
          (sql) => execute(sql, undefined),
          () => work(executorFor(outer)),
          ambient,
        );
      if (closed) throw new Error(`PGlite database ${schema} is closed`);
      await instance.lock.acquire();
      const scope = createTransactionScope(owner, instance.pg);
      try {
        await ensureSchema();
        await execute('BEGIN', undefined);
        try {
          const result = await runTransactionWork(scope, ambient, work, executorFor(scope));
          await execute('COMMIT', undefined);
          return result;
        } catch (error) {
          await execute('ROLLBACK', undefined);
          throw error;
        }
      } finally {
        scope.finished = true;
        instance.lock.release();
      }
    },
    onClose: closeHooks.add,
    close: closeHooks.close,
  };
}
