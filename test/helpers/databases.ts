import { closeSync, copyFileSync, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, beforeEach, describe } from 'vitest';
import {
  createPostgresDatabase,
  createSqliteDatabase,
  defaultMigrationsDir,
  migrate,
  type SqlDatabase,
  type SqlDialect,
  type SqliteDatabase,
} from '../../src/store/index.js';
import { createPgliteDatabase, createPgliteInstance, type PgliteInstance } from './pglite-database.js';

/**
 * Store tests run on both dialects. SQLite: a fresh `:memory:` database per test. Postgres: a real
 * server when one answers (AGENTD_TEST_PG_URL, else postgres://postgres@127.0.0.1:5432/test, else the
 * same as `root`), with a fresh schema per test that is dropped afterwards; otherwise PGlite, one instance
 * per test file (it is costly to start) with a fresh schema per test. AGENTD_TEST_PG_URL=pglite forces
 * PGlite even where a server is reachable, so both paths can be exercised on one machine.
 */
export type PostgresTestBackend = { kind: 'server'; url: string } | { kind: 'pglite' };

const defaultCandidates = ['postgres://postgres@127.0.0.1:5432/test', 'postgres://root@127.0.0.1:5432/test'];
const probeTimeoutMs = 1_000;
// Schemas left behind by killed test runs are dropped once they are this old.
const staleSchemaAgeMs = 60 * 60 * 1_000;
const schemaPrefix = 'agentd_t_';

async function tryServer(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: probeTimeoutMs });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch (error) {
    // The server is there but the `test` database is not: create it once.
    if ((error as { code?: string }).code !== '3D000') return false;
    const adminUrl = new URL(url);
    const database = adminUrl.pathname.slice(1);
    adminUrl.pathname = '/postgres';
    const admin = new pg.Client({
      connectionString: adminUrl.toString(),
      connectionTimeoutMillis: probeTimeoutMs,
    });
    try {
      await admin.connect();
      await admin.query(`CREATE DATABASE "${database.replaceAll('"', '')}"`);
    } catch (createError) {
      // 42P04: another worker created it meanwhile.
      if ((createError as { code?: string }).code !== '42P04') return false;
    } finally {
      await admin.end().catch(() => {});
    }
    return tryServer(url);
  } finally {
    await client.end().catch(() => {});
  }
}

async function detectBackend(): Promise<PostgresTestBackend> {
  const configured = process.env.AGENTD_TEST_PG_URL;
  if (configured === 'pglite') return { kind: 'pglite' };
  if (configured) {
    if (await tryServer(configured)) return { kind: 'server', url: configured };
    throw new Error(`AGENTD_TEST_PG_URL is set but ${configured} does not answer`);
  }
  for (const url of defaultCandidates) if (await tryServer(url)) return { kind: 'server', url };
  return { kind: 'pglite' };
}

/** Prints once per test run (all workers share the vitest parent process). */
function announce(backend: PostgresTestBackend): void {
  const marker = join(tmpdir(), `agentd-test-pg-backend-${process.ppid}`);
  try {
    closeSync(openSync(marker, 'wx'));
  } catch {
    return;
  }
  const where = backend.kind === 'server' ? `server ${backend.url}` : 'PGlite (in-process)';
  console.log(`[agentd tests] postgres backend: ${where}`);
}

let backendPromise: Promise<PostgresTestBackend> | undefined;
export function postgresTestBackend(): Promise<PostgresTestBackend> {
  backendPromise ??= detectBackend().then((backend) => {
    announce(backend);
    return backend;
  });
  return backendPromise;
}

/** A database of its own on the Postgres server, with the admin connection that made it. */
export interface ScratchPostgresDatabase {
  name: string;
  /** Connects to it (for child processes, which pick their database by URL). */
  url: string;
  /** Connected to the server's default database: for statements about this one (terminating its backends). */
  admin: pg.Pool;
  /** Drops it, with the connections still open to it. */
  drop(): Promise<void>;
}

/**
 * A database of its own for a test that runs `agentd` in child processes on Postgres: they take a database by
 * URL, not a schema. Throws when no Postgres server answers (PGlite has no URL).
 */
export async function createScratchPostgresDatabase(prefix: string): Promise<ScratchPostgresDatabase> {
  const backend = await postgresTestBackend();
  if (backend.kind !== 'server')
    throw new Error('this test needs a Postgres server (AGENTD_TEST_PG_URL or 127.0.0.1:5432)');
  const name = `${prefix}_${Date.now().toString(36)}_${process.pid}`;
  const admin = new pg.Pool({ connectionString: backend.url, max: 1 });
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(backend.url);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    admin,
    async drop() {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}

let adminPool: pg.Pool | undefined;
let staleSchemasDropped = false;
function admin(url: string): pg.Pool {
  if (!adminPool) {
    adminPool = new pg.Pool({ connectionString: url, max: 2, allowExitOnIdle: true });
    adminPool.on('error', () => {});
  }
  return adminPool;
}

async function dropStaleSchemas(pool: pg.Pool): Promise<void> {
  if (staleSchemasDropped) return;
  staleSchemasDropped = true;
  const { rows } = await pool.query<{ nspname: string }>(
    'SELECT nspname FROM pg_namespace WHERE nspname LIKE $1',
    [`${schemaPrefix}%`],
  );
  for (const { nspname } of rows) {
    const createdAt = Number.parseInt(nspname.slice(schemaPrefix.length).split('_')[0] ?? '', 36);
    if (Number.isFinite(createdAt) && Date.now() - createdAt > staleSchemaAgeMs) {
      await pool.query(`DROP SCHEMA IF EXISTS ${nspname} CASCADE`).catch(() => {});
    }
  }
}

let pgliteInstance: Promise<PgliteInstance> | undefined;
let schemaCounter = 0;
function nextSchemaName(): string {
  return `${schemaPrefix}${Date.now().toString(36)}_${process.pid}_${++schemaCounter}`;
}

export interface OpenTestDatabaseOptions {
  /** Apply the migrations (default true). */
  migrate?: boolean;
}

/** A fresh database of the dialect; `close()` also removes whatever it created (schema, instance state). */
export async function openTestDatabase(
  dialect: SqlDialect,
  options: OpenTestDatabaseOptions = {},
): Promise<SqlDatabase> {
  const db =
    dialect === 'sqlite' ? createSqliteDatabase({ path: ':memory:' }) : await openPostgresTestDatabase();
  if (options.migrate !== false) {
    try {
      await migrate(db);
    } catch (error) {
      await db.close();
      throw error;
    }
  }
  return db;
}

async function openPostgresTestDatabase(): Promise<SqlDatabase> {
  const backend = await postgresTestBackend();
  const schema = nextSchemaName();
  if (backend.kind === 'server') {
    const pool = admin(backend.url);
    await dropStaleSchemas(pool);
    await pool.query(`CREATE SCHEMA ${schema}`);
    const db = createPostgresDatabase({
      connectionString: backend.url,
      schema,
      poolSize: 4,
      // Test data need not survive a server crash; skipping the fsync per commit makes tests much faster.
      settings: { synchronous_commit: 'off' },
    });
    return {
      ...db,
      async close() {
        await db.close();
        await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      },
    };
  }
  pgliteInstance ??= createPgliteInstance();
  const instance = await pgliteInstance;
  await instance.lock.acquire();
  try {
    await instance.pg.exec(`CREATE SCHEMA ${schema}`);
  } finally {
    instance.lock.release();
  }
  return createPgliteDatabase({
    instance,
    schema,
    onClose: async () => {
      await instance.lock.acquire();
      try {
        await instance.pg.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        if (instance.currentSchema === schema) instance.currentSchema = undefined;
      } finally {
        instance.lock.release();
      }
    },
  });
}

/**
 * Declares `${name} [sqlite]` and `${name} [postgres]`; `body` declares tests that reach the current
 * test's fresh, migrated database through `getDb()` (also usable in the body's own beforeEach hooks).
 */
export function describeEachDatabase(name: string, body: (getDb: () => SqlDatabase) => void): void {
  for (const dialect of ['sqlite', 'postgres'] as const) {
    describe(`${name} [${dialect}]`, () => {
      let db: SqlDatabase | undefined;
      beforeEach(async () => {
        db = await openTestDatabase(dialect);
      });
      afterEach(async () => {
        const current = db;
        db = undefined;
        await current?.close();
      });
      body(() => {
        if (!db) throw new Error('getDb() is only available while a test (or its hooks) runs');
        return db;
      });
    });
  }
}

/** The database with a count of the statements sent through it (transactions count as one). */
export function counted(db: SqlDatabase): { db: SqlDatabase; statements: () => number } {
  let statements = 0;
  const wrapped: SqlDatabase = {
    ...db,
    all: (sql, params) => {
      statements++;
      return db.all(sql, params);
    },
    get: (sql, params) => {
      statements++;
      return db.get(sql, params);
    },
    run: (sql, params) => {
      statements++;
      return db.run(sql, params);
    },
    transaction: (work) => {
      statements++;
      return db.transaction(work);
    },
    close: () => db.close(),
  };
  return { db: wrapped, statements: () => statements };
}

/** A SQLite file's path in a new temporary directory; `remove` deletes the directory and all in it. */
export function temporarySqliteFile(prefix: string): { path: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { path: join(dir, 'test.db'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A migrated SQLite file for each test of the calling block (where another connection to the same file is
 * part of the test), closed and removed after it.
 */
export function useMigratedSqliteFile(prefix: string): { db(): SqliteDatabase; path(): string } {
  let file!: ReturnType<typeof temporarySqliteFile>;
  let db!: SqliteDatabase;
  beforeEach(async () => {
    file = temporarySqliteFile(prefix);
    db = createSqliteDatabase({ path: file.path });
    await migrate(db);
  });
  afterEach(async () => {
    await db.close();
    file.remove();
  });
  return { db: () => db, path: () => file.path };
}

/** Applies the package's migrations older than `version` only: the schema a migration's test starts from. */
export async function migrateBefore(db: SqlDatabase, version: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-migrations-'));
  try {
    for (const dialect of ['sqlite', 'postgres']) {
      mkdirSync(join(dir, dialect));
      for (const file of readdirSync(join(defaultMigrationsDir(), dialect)))
        if (Number.parseInt(file, 10) < version)
          copyFileSync(join(defaultMigrationsDir(), dialect, file), join(dir, dialect, file));
    }
    await migrate(db, { dir });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
