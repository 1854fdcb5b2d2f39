import { createRequire } from 'node:module';
import type pg from 'pg';

let driver: typeof pg | undefined;

/**
 * node-postgres, loaded when a store first uses Postgres rather than with the store module: a runtime on
 * SQLite, and every command of the CLI, starts without it (about 60 ms). Required, not imported: it is
 * CommonJS, and its ES module wrapper re-exports this same object.
 */
export function pgDriver(): typeof pg {
  driver ??= createRequire(import.meta.url)('pg') as typeof pg;
  return driver;
}
