import { copyFileSync, mkdirSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultMigrationsDir, loadMigrations } from '../../src/store/index.js';

/** The shipped migrations up to `version`, both dialects: a database as an older agentd left it. */
export function migrationsUpTo(version: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-migrations-upto-'));
  for (const dialect of ['sqlite', 'postgres']) {
    mkdirSync(join(dir, dialect));
    for (const file of readdirSync(join(defaultMigrationsDir(), dialect)))
      if (Number(file.slice(0, 4)) <= version)
        copyFileSync(join(defaultMigrationsDir(), dialect, file), join(dir, dialect, file));
  }
  return dir;
}

/** The shipped migrations' versions from `version` on: what migrating a database left at `version - 1` applies. */
export function shippedVersionsFrom(version: number): number[] {
  return loadMigrations('sqlite')
    .map((migration) => migration.version)
    .filter((shipped) => shipped >= version);
}
