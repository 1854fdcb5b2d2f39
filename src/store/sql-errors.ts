/**
 * True for a unique or primary-key violation on either dialect, so callers can turn a lost insert race
 * into a conflict without parsing driver messages.
 */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  // SQLite extended result codes; Postgres SQLSTATE 23505 (pg and PGlite both expose it as `code`).
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === '23505';
}

// Disk full, I/O failure, a file that became read-only or unopenable, a lock held too long: the database is
// there but cannot take the statement now, and the same statement may succeed later.
const unavailableSqliteCodes = /^SQLITE_(FULL|IOERR|CANTOPEN|READONLY|BUSY|LOCKED|PROTOCOL)/;
const unavailableSystemCodes = new Set(['ENOSPC', 'EIO', 'EDQUOT', 'EROFS', 'EACCES', 'EPERM']);

/** True when a SQLite error means "the store cannot be used right now" rather than "this SQL is wrong". */
export function isSqliteUnavailable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && (unavailableSqliteCodes.test(code) || unavailableSystemCodes.has(code));
}

/** SQLITE_BUSY (any extended code): another connection holds the lock the statement needs; it did nothing. */
export function isSqliteBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}
