export type { SqlDatabase, SqlDialect, SqlExecutor, SqlRunResult, SqlValue } from './database.js';
