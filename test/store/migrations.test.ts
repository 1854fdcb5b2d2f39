import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CURRENT_SCHEMA_VERSION,
  currentSchemaVersion,
  loadMigrations,
  migrate,
  type SqlDatabase,
  schemaVersionOf,
} from '../../src/store/index.js';
import { AgentdError } from '../../src/util/index.js';
import { describeEachDatabase, openTestDatabase } from '../helpers/databases.js';

/** A migrations folder with the same files for both dialects. */
function migrationsDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-migrations-'));
  for (const dialect of ['sqlite', 'postgres']) {
    mkdirSync(join(dir, dialect));
    for (const [name, sql] of Object.entries(files)) writeFileSync(join(dir, dialect, name), sql);
  }
  return dir;
}

const first = {
  '0001_widgets.sql':
    'CREATE TABLE widgets (id TEXT PRIMARY KEY, size INTEGER NOT NULL);\nCREATE INDEX widgets_size ON widgets (size);',
  '0002_gadgets.sql':
    "CREATE TABLE gadgets (id TEXT PRIMARY KEY);\nINSERT INTO gadgets (id) VALUES ('seed');",
};

describe('migration files', () => {
  it('finds the shipped migrations for both dialects with the same numbers', () => {
    const sqlite = loadMigrations('sqlite').map((migration) => migration.version);
    const postgres = loadMigrations('postgres').map((migration) => migration.version);
    expect(sqlite[0]).toBe(1);
    expect(sqlite).toEqual(postgres);
    expect(CURRENT_SCHEMA_VERSION).toBe(sqlite.at(-1));
    expect(currentSchemaVersion('sqlite')).toBe(CURRENT_SCHEMA_VERSION);
  });

  it('rejects a badly named migration file', () => {
    const dir = migrationsDir({ '1_bad.sql': 'SELECT 1' });
    expect(() => loadMigrations('sqlite', dir)).toThrow(/NNNN_name\.sql/);
  });
});

describeEachDatabase('migrate', (getDb) => {
  const opened: SqlDatabase[] = [];
  const fresh = async () => {
    const db = await openTestDatabase(getDb().dialect, { migrate: false });
    opened.push(db);
    return db;
  };
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((db) => db.close()));
  });

  it('brings a new database to the current version and is idempotent', async () => {
    const db = getDb();
    expect(await schemaVersionOf(db)).toBe(currentSchemaVersion(db.dialect));
    const again = await migrate(db);
    expect(again).toEqual({ applied: [], version: currentSchemaVersion(db.dialect) });
    const rows = await db.all<{ version: number; name: string }>(
      'SELECT version, name FROM schema_migrations ORDER BY version',
    );
    expect(rows[0]).toEqual({ version: 1, name: 'core' });
  });

  it('applies multi-statement files in order and only the pending ones later', async () => {
    const db = await fresh();
    const result = await migrate(db, { dir: migrationsDir(first), now: () => 42 });
    expect(result).toEqual({ applied: [1, 2], version: 2 });
    expect(await db.all('SELECT id FROM gadgets')).toEqual([{ id: 'seed' }]);
    expect(await migrate(db, { dir: migrationsDir(first) })).toEqual({ applied: [], version: 2 });
    const later = migrationsDir({ ...first, '0003_more.sql': 'ALTER TABLE widgets ADD COLUMN color TEXT;' });
    expect(await migrate(db, { dir: later })).toEqual({ applied: [3], version: 3 });
    await db.run('INSERT INTO widgets (id, size, color) VALUES (?, ?, ?)', ['w', 1, 'red']);
    expect(await db.get('SELECT applied_at FROM schema_migrations WHERE version = 1')).toEqual({
      applied_at: 42,
    });
  });

  it('applies each migration once when migrators run concurrently', async () => {
    const db = await fresh();
    const dir = migrationsDir(first);
    const results = await Promise.all([migrate(db, { dir }), migrate(db, { dir }), migrate(db, { dir })]);
    expect(results.flatMap((result) => result.applied).sort()).toEqual([1, 2]);
    expect(await db.all('SELECT id FROM gadgets')).toEqual([{ id: 'seed' }]);
  });

  it('rolls a failing migration back entirely and keeps the earlier ones', async () => {
    const db = await fresh();
    const dir = migrationsDir({
      '0001_widgets.sql': first['0001_widgets.sql'],
      '0002_broken.sql': 'CREATE TABLE half (id TEXT);\nINSERT INTO no_such_table (id) VALUES (1);',
    });
    await expect(migrate(db, { dir })).rejects.toThrow(/no_such_table/);
    expect(await schemaVersionOf(db)).toBe(1);
    await expect(db.all('SELECT id FROM half')).rejects.toThrow();
  });

  it('refuses a database whose schema is newer than the code', async () => {
    const db = getDb();
    const known = currentSchemaVersion(db.dialect);
    await db.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', [
      known + 5,
      'future',
      1,
    ]);
    const error = await migrate(db).catch((caught: unknown) => caught);
    expect(AgentdError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: 'SCHEMA_TOO_NEW', fault: 'system' });
    expect((error as Error).message).toContain(`schema version ${known + 5}`);
    expect((error as Error).message).toContain(`versions up to ${known}`);
  });
});
