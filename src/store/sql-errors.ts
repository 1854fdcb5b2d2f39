import { AgentdError, isStoreUnavailable } from '../util/index.js';

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

// Postgres SQLSTATE classes of a server that cannot run the statement now: 08 connection exception, 40
// transaction rollback (serialization failure, deadlock), 53 insufficient resources (disk full, out of
// memory, too many connections), 57 operator intervention (shutdown, cannot connect now, statement
// timeout), 58 system error (I/O); and 55P03, a lock not available in time.
const unavailableSqlState = /^(08|40|53|57|58)[0-9A-Z]{3}$|^55P03$/;
// Network failures reaching a database server; the file-system ones are in `unavailableSystemCodes`.
const unavailableNetworkCodes = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'EAI_AGAIN',
]);

/**
 * True when a failed statement or transaction may succeed if it is tried again later: the database was
 * unavailable (an agentd error coded STORE_UNAVAILABLE or marked retryable, or a driver's or the system's
 * code for a full disk, an I/O error, a lock, a lost connection, a serialization failure or deadlock).
 * Anything else (a constraint violation, an SQL error, a value the driver refuses, a bug that threw) is a
 * defect: the same statement fails the same way every time.
 */
export function mightSucceedLater(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  // An agentd error says so itself, and its `code` is agentd's, not a driver's.
  if (AgentdError.isInstance(error)) return error.retryable || isStoreUnavailable(error);
  if (isSqliteUnavailable(error)) return true;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && (unavailableSqlState.test(code) || unavailableNetworkCodes.has(code));
}
