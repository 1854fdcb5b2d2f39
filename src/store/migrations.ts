import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../util/index.js';
import { ErrorCodes, SystemError, silentLogger } from '../util/index.js';
import type { SqlDatabase, SqlDialect, SqlExecutor } from './database.js';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export interface MigrateOptions {
  /** The folder holding `sqlite/` and `postgres/`; defaults to the package's `migrations/`. */
  dir?: string;
  logger?: Logger;
  /** Epoch milliseconds for `applied_at`. */
  now?: () => number;
}

export interface MigrateResult {
  /** Versions applied by this call, in order. */
  applied: number[];
  /** The database's schema version afterwards. */
  version: number;
}

const fileNamePattern = /^(\d{4})_([a-z0-9_]+)\.sql$/;
// Any constant works; all agentd processes must agree on it.
const postgresMigrationLockKey = 7_240_611_001;

/**
 * Finds the package root by walking up from this module until `migrations/` appears, so the same code
 * works from `src/store/` (tsx, vitest) and from `dist/store/` (built package).
 */
function findDefaultMigrationsDir(): string {
  let directory = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(directory, 'migrations');
    if (existsSync(join(candidate, 'sqlite')) && existsSync(join(directory, 'package.json')))
      return candidate;
    const parent = dirname(directory);
    if (parent === directory) {
      throw new SystemError({
        code: ErrorCodes.internal,
        message: 'cannot find the migrations/ folder of the agentd package',
      });
    }
    directory = parent;
  }
}

let defaultDir: string | undefined;
export function defaultMigrationsDir(): string {
  defaultDir ??= findDefaultMigrationsDir();
  return defaultDir;
}

const loaded = new Map<string, Migration[]>();

/** Reads `<dir>/<dialect>/NNNN_name.sql`, sorted by version. Files are read once per process. */
export function loadMigrations(dialect: SqlDialect, dir: string = defaultMigrationsDir()): Migration[] {
  const folder = join(dir, dialect);
  const cached = loaded.get(folder);
  if (cached) return cached;
  const migrations: Migration[] = [];
  const seen = new Map<number, string>();
  const files = existsSync(folder) ? readdirSync(folder).filter((file) => file.endsWith('.sql')) : [];
  for (const file of files.sort()) {
    const match = fileNamePattern.exec(file);
    if (!match) {
      throw new SystemError({
        code: ErrorCodes.internal,
        message: `migration file ${join(folder, file)} is not named NNNN_name.sql`,
      });
    }
    const version = Number(match[1]);
    const duplicate = seen.get(version);
    if (duplicate) {
      throw new SystemError({
        code: ErrorCodes.internal,
        message: `migrations ${duplicate} and ${file} share version ${version}`,
      });
    }
    seen.set(version, file);
    migrations.push({ version, name: match[2]!, sql: readFileSync(join(folder, file), 'utf8') });
  }
  migrations.sort((left, right) => left.version - right.version);
  loaded.set(folder, migrations);
  return migrations;
}

/** The highest migration number shipped with this code for a dialect (0 when there is none). */
export function currentSchemaVersion(dialect: SqlDialect, dir?: string): number {
  return loadMigrations(dialect, dir).at(-1)?.version ?? 0;
}

/** The highest migration number shipped with this code, across both dialects. */
export const CURRENT_SCHEMA_VERSION: number = Math.max(
  currentSchemaVersion('sqlite'),
  currentSchemaVersion('postgres'),
);

async function lockAndEnsureTable(tx: SqlExecutor): Promise<void> {
  // Serialises migrators across processes; released when the transaction ends.
  if (tx.dialect === 'postgres') await tx.run(`SELECT pg_advisory_xact_lock(${postgresMigrationLockKey})`);
  await tx.run(
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)',
  );
}

async function appliedVersions(tx: SqlExecutor): Promise<Set<number>> {
  const rows = await tx.all<{ version: number }>('SELECT version FROM schema_migrations');
  return new Set(rows.map((row) => Number(row.version)));
}

/** The schema version of a database: the highest applied migration, 0 for an empty database. */
export async function schemaVersionOf(db: SqlDatabase): Promise<number> {
  return db.transaction(async (tx) => {
    await lockAndEnsureTable(tx);
    return Math.max(0, ...(await appliedVersions(tx)));
  });
}

/**
 * Applies pending migrations in order, each in its own transaction together with its `schema_migrations`
 * row, so a crash leaves the database at a clean version. Refuses (SystemError `SCHEMA_TOO_NEW`) a
 * database migrated by newer code: running old code against a newer schema can corrupt data.
 * Safe to call concurrently from several processes: on Postgres an advisory lock serialises them; on
 * SQLite the write lock of `BEGIN IMMEDIATE` does.
 */
export async function migrate(db: SqlDatabase, options: MigrateOptions = {}): Promise<MigrateResult> {
  const logger = (options.logger ?? silentLogger).child({ component: 'store' });
  const now = options.now ?? Date.now;
  const migrations = loadMigrations(db.dialect, options.dir);
  const known = migrations.at(-1)?.version ?? 0;

  const existing = await db.transaction(async (tx) => {
    await lockAndEnsureTable(tx);
    return appliedVersions(tx);
  });
  const newest = Math.max(0, ...existing);
  if (newest > known) {
    throw new SystemError({
      code: ErrorCodes.schemaTooNew,
      message:
        `The database at ${db.location} has schema version ${newest}, but this agentd knows versions up to ${known}. ` +
        'Upgrade agentd, or point it at another database.',
      details: { databaseVersion: newest, knownVersion: known },
    });
  }

  const applied: number[] = [];
  for (const migration of migrations) {
    if (existing.has(migration.version)) continue;
    const didApply = await db.transaction(async (tx) => {
      await lockAndEnsureTable(tx);
      // Another process may have applied it while we waited for the lock.
      const row = await tx.get('SELECT version FROM schema_migrations WHERE version = ?', [
        migration.version,
      ]);
      if (row) return false;
      await tx.run(migration.sql);
      await tx.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', [
        migration.version,
        migration.name,
        now(),
      ]);
      return true;
    });
    if (didApply) {
      applied.push(migration.version);
      logger.info(
        { version: migration.version, name: migration.name, location: db.location },
        'applied migration',
      );
    }
  }
  return { applied, version: Math.max(newest, known) };
}
