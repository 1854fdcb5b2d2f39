import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statfsSync } from 'node:fs';
import { join } from 'node:path';
import type { Bus } from '../bus/index.js';
import type { Clock, IdGenerator, Logger } from '../util/index.js';
import {
  AgentdError,
  ErrorCodes,
  SystemError,
  silentLogger,
  sleep,
  systemClock,
  UserInputError,
} from '../util/index.js';
import type { SqlDatabase } from './database.js';
import { createEventStore, type EventStore } from './event-store.js';
import { createKvStore, type KvStore } from './kv-store.js';
import { migrate } from './migrations.js';
import { createPostgresDatabase, redactConnectionString } from './postgres-database.js';
import { createPostgresListener } from './postgres-listener.js';
import { createSessionStore, type SessionStore } from './session-store.js';
import { isSqliteBusy } from './sql-errors.js';
import { createSqliteDatabase } from './sqlite-database.js';

/** `memory` is RAM-only: either asked for (tests) or the fallback when the database file is unusable. */
export type StoreMode = 'sqlite' | 'postgres' | 'memory';

/** agentd's persistence: the database and the core stores on it (sessions, events, key-value). */
export interface Store {
  readonly db: SqlDatabase;
  readonly sessions: SessionStore;
  readonly events: EventStore;
  readonly kv: KvStore;
  readonly mode: StoreMode;
  /** Why the store runs RAM-only although a file was asked for; undefined when it is not degraded. */
  readonly degradedReason?: string;
  close(): Promise<void>;
}

/** Options of `createStore`: Postgres with a URL, otherwise SQLite in the state directory. */
export interface CreateStoreOptions {
  /** A `postgres://` URL (usually DATABASE_URL) selects Postgres; without it the store is a SQLite file. */
  databaseUrl?: string;
  /** The state directory; the SQLite file is `<stateDir>/agentd.db`. */
  stateDir: string;
  /** Postgres only: the schema to use instead of the server's default search_path. */
  schema?: string;
  /** Postgres only: pool size. */
  poolSize?: number;
  /**
   * Postgres only: first delay before the session store's LISTEN connection reconnects after it dropped
   * (default 500 ms, doubling up to 30 s). While it is down, every chat turn reads its session's row.
   */
  listenReconnectDelayMs?: number;
  logger?: Logger;
  /** Receives `store:degraded` and `system:error` when the store falls back to RAM. */
  bus?: Bus;
  clock?: Clock;
  idGenerator?: IdGenerator;
  /** Migrations folder (default: the package's `migrations/`). */
  migrationsDir?: string;
  /**
   * SQLite only: least free space on the state directory's file system to start with (default 1 MiB). Below
   * it SQLite's shared-memory file cannot grow and the process would die of SIGBUS without a log line.
   */
  minFreeBytes?: number;
  /** Free bytes of the file system holding `dir` (tests replace it); default `statfs`. */
  freeBytes?: (dir: string) => number;
  /** SQLite only: how long one statement waits for another connection's lock (default 5 s). */
  sqliteBusyTimeoutMs?: number;
  /**
   * SQLite only: how long a start waits while another process holds the file's write lock, as its
   * migrations do after an upgrade (default 2 minutes). Past it the start fails with STORE_UNAVAILABLE: a
   * locked file is in use, not unusable, so it is never a reason for RAM-only mode.
   */
  openWaitMs?: number;
}

export const sqliteFileName = 'agentd.db';

const ownerOnlyFile = 0o600;
const ownerOnlyDir = 0o700;

/** The state directory (0700) and the database file (0600); SQLite gives `-wal` and `-shm` the file's mode. */
function createPrivateDatabaseFile(stateDir: string, path: string): void {
  mkdirSync(stateDir, { recursive: true, mode: ownerOnlyDir });
  closeSync(openSync(path, 'a', ownerOnlyFile));
  for (const file of [path, `${path}-wal`, `${path}-shm`])
    if (existsSync(file)) chmodSync(file, ownerOnlyFile);
}

/**
 * Checks what SQLite cannot report itself. SQLite maps the `-shm` file into memory: when a page of it cannot
 * be backed (no space left on the file system, a file that cannot be written) the process gets SIGBUS and
 * dies without a log line. So this fails first, loudly, with the reason.
 */
function checkSharedMemoryWritable(stateDir: string, path: string, options: CreateStoreOptions): void {
  const refuse = (message: string, cause?: unknown) =>
    new SystemError({
      code: ErrorCodes.storeUnavailable,
      message: `${message}; agentd does not start on it because SQLite would crash (SIGBUS) without saying why`,
      retryable: true,
      ...(cause ? { cause } : {}),
      details: { path },
    });
  const freeBytes =
    options.freeBytes ??
    ((dir: string) => {
      const stats = statfsSync(dir);
      return stats.bavail * stats.bsize;
    });
  const free = freeBytes(stateDir);
  const minFree = options.minFreeBytes ?? 1024 * 1024;
  if (free < minFree)
    throw refuse(`only ${free} bytes are free for the database in ${stateDir} (at least ${minFree} needed)`);
  for (const file of [`${path}-wal`, `${path}-shm`]) {
    if (!existsSync(file)) continue;
    try {
      // Opening for writing is the check: read-only files, directories in the way and EROFS fail here.
      closeSync(openSync(file, 'r+'));
    } catch (error) {
      throw refuse(`cannot write ${file}: ${(error as Error).message}`, error);
    }
  }
}

/** Postgres's NOTIFY channel for sessions archived or deleted (migration 0033's triggers send on it). */
const sessionEndsChannel = 'agentd_session_ends';

function assemble(
  db: SqlDatabase,
  mode: StoreMode,
  options: {
    clock?: Clock;
    idGenerator?: IdGenerator;
    degradedReason?: string;
    endsVersion?: () => number | undefined;
    /** Closed before the database. */
    closeFirst?: () => Promise<void>;
  },
): Store {
  const clock = options.clock ?? systemClock;
  return {
    db,
    sessions: createSessionStore(db, {
      clock,
      ...(options.idGenerator ? { idGenerator: options.idGenerator } : {}),
      ...(options.endsVersion ? { endsVersion: options.endsVersion } : {}),
    }),
    events: createEventStore(db),
    kv: createKvStore(db, { clock }),
    mode,
    ...(options.degradedReason === undefined ? {} : { degradedReason: options.degradedReason }),
    close: async () => {
      await options.closeFirst?.();
      await db.close();
    },
  };
}

async function openPostgres(options: CreateStoreOptions, databaseUrl: string, base: Logger): Promise<Store> {
  const logger = base.child({ component: 'store' });
  const db = createPostgresDatabase({
    connectionString: databaseUrl,
    logger: base,
    ...(options.schema ? { schema: options.schema } : {}),
    ...(options.poolSize ? { poolSize: options.poolSize } : {}),
  });
  try {
    await db.get('SELECT 1');
  } catch (error) {
    await db.close().catch(() => {});
    if (AgentdError.isInstance(error)) throw error;
    throw new SystemError({
      code: ErrorCodes.storeUnavailable,
      message: `cannot use Postgres at ${redactConnectionString(databaseUrl)}: ${(error as Error).message}`,
      retryable: true,
      cause: error,
    });
  }
  // The schema the tables are in, which the triggers name in their announcements (migration 0036): stores of
  // other schemas in the same database announce on the same channel.
  let ownSchema: string | undefined;
  try {
    await migrate(db, { logger: base, ...(options.migrationsDir ? { dir: options.migrationsDir } : {}) });
    ownSchema = (await db.get<{ name: string }>('SELECT current_schema() AS name'))?.name;
  } catch (error) {
    await db.close().catch(() => {});
    throw error;
  }
  logger.info({ location: db.location }, 'store opened on postgres');
  // Sessions ended by other processes are announced (migration 0033), so the session store can keep the ids
  // of active sessions while it hears them: a chat turn then does not read its session's row. Every
  // announcement, and every LISTEN after a reconnect (what was sent while it was down is lost), changes the
  // version; while nothing is heard there is none, and the ids are read every time as before.
  let endsVersion = 0;
  const listener = createPostgresListener({
    connectionString: databaseUrl,
    channel: sessionEndsChannel,
    logger,
    purpose: 'session store',
    ...(options.listenReconnectDelayMs === undefined
      ? {}
      : { reconnectDelayMs: options.listenReconnectDelayMs }),
    // An announcement that names no schema (migration 0033's trigger, where 0036 has not run) may be this schema's.
    onNotification: (schemaOfEnd) => {
      if (schemaOfEnd === ownSchema || schemaOfEnd === '') endsVersion++;
    },
    onListening: () => {
      endsVersion++;
    },
  });
  return assemble(db, 'postgres', {
    ...options,
    endsVersion: () => (listener.listening() && !db.inTransaction() ? endsVersion : undefined),
    closeFirst: () => listener.close(),
  });
}

/**
 * Opens the store: Postgres when `databaseUrl` is given (an unreachable server is a `STORE_UNAVAILABLE`
 * error, never a silent fallback), else the SQLite file `<stateDir>/agentd.db`. Migrations are applied.
 *
 * When the SQLite file cannot be created, opened or written, or is not a database, agentd keeps running
 * with a migrated in-memory database (mode `memory`), logs an error, and publishes `store:degraded` and
 * `system:error`: a broken disk should not take the whole agent down, but nobody may miss that nothing is
 * being kept. The unusable file is left untouched for the operator. A database newer than the code
 * (`SCHEMA_TOO_NEW`) is not a disk problem and is thrown.
 */
export async function createStore(options: CreateStoreOptions): Promise<Store> {
  // The database and the migrations runner name their own component; given this logger's child they would
  // log the key twice.
  const base = options.logger ?? silentLogger;
  const logger = base.child({ component: 'store' });
  const migrateOptions = { logger: base, ...(options.migrationsDir ? { dir: options.migrationsDir } : {}) };
  const databaseUrl = options.databaseUrl?.trim();
  if (databaseUrl) {
    if (!/^postgres(ql)?:\/\//i.test(databaseUrl)) {
      throw new UserInputError({
        code: ErrorCodes.invalidConfig,
        message: 'DATABASE_URL must be a postgres:// or postgresql:// URL; leave it unset to use SQLite',
      });
    }
    return openPostgres(options, databaseUrl, base);
  }

  const path = join(options.stateDir, sqliteFileName);
  const fallBackToMemory = async (error: unknown): Promise<Store> => {
    const reason = `cannot use the database file ${path}: ${(error as Error).message}`;
    const memory = createSqliteDatabase({ path: ':memory:', logger: base });
    await migrate(memory, migrateOptions);
    logger.error(
      { err: error, path, mode: 'memory' },
      `STORE DEGRADED: ${reason}. Running RAM-only: sessions, memory and work are lost when agentd stops.`,
    );
    options.bus?.publish('store:degraded', { reason, path });
    options.bus?.publish('system:error', {
      code: ErrorCodes.storeUnavailable,
      message: reason,
      component: 'store',
    });
    return assemble(memory, 'memory', { ...options, degradedReason: reason });
  };
  try {
    createPrivateDatabaseFile(options.stateDir, path);
  } catch (error) {
    return fallBackToMemory(error);
  }
  checkSharedMemoryWritable(options.stateDir, path, options);
  const openWaitMs = options.openWaitMs ?? 120_000;
  const clock = options.clock ?? systemClock;
  const startedAt = clock.now();
  for (let attempt = 1; ; attempt++) {
    let db: SqlDatabase | undefined;
    try {
      db = createSqliteDatabase({
        path,
        logger: base,
        ...(options.sqliteBusyTimeoutMs !== undefined ? { busyTimeoutMs: options.sqliteBusyTimeoutMs } : {}),
      });
      await migrate(db, migrateOptions);
      createPrivateDatabaseFile(options.stateDir, path);
      logger.info({ location: path }, 'store opened on sqlite');
      return assemble(db, 'sqlite', options);
    } catch (error) {
      await db?.close().catch(() => {});
      if (heldByAnotherProcess(error)) {
        const waitedMs = clock.now() - startedAt;
        if (waitedMs >= openWaitMs)
          throw new SystemError({
            code: ErrorCodes.storeUnavailable,
            message: `another process has held the write lock of ${path} for ${Math.round(waitedMs / 1000)} s; agentd does not start without it`,
            retryable: true,
            cause: error,
            details: { path, waitedMs },
          });
        if (attempt === 1)
          logger.warn({ path }, 'another process holds the database write lock (migrating?); waiting for it');
        await sleep(Math.min(1_000, 50 * attempt));
        continue;
      }
      // A file that cannot be written right now falls back to RAM like one that cannot be opened.
      if (AgentdError.isInstance(error) && error.code !== ErrorCodes.storeUnavailable) throw error;
      return fallBackToMemory(error);
    }
  }
}

/** SQLITE_BUSY, raw from the driver at open or translated by a statement: the file is fine, and in use. */
function heldByAnotherProcess(error: unknown): boolean {
  if (isSqliteBusy(error)) return true;
  return AgentdError.isInstance(error) && isSqliteBusy({ code: error.details?.driverCode });
}

/** A migrated in-memory store, for tests and throwaway runs. */
export async function createMemoryStore(
  options: { logger?: Logger; clock?: Clock; idGenerator?: IdGenerator; migrationsDir?: string } = {},
): Promise<Store> {
  const db = createSqliteDatabase({
    path: ':memory:',
    ...(options.logger ? { logger: options.logger } : {}),
  });
  await migrate(db, {
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.migrationsDir ? { dir: options.migrationsDir } : {}),
  });
  return assemble(db, 'memory', options);
}
