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
