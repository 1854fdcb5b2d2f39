/** `?, ?, …`: `count` portable placeholders, for an IN list or one row of VALUES. */
export function sqlPlaceholders(count: number): string {
  return new Array(count).fill('?').join(', ');
}

/** `(?, ?), (?, ?), …`: `rows` rows of `columns` placeholders each, for an INSERT of several rows. */
export function sqlValueRows(rows: number, columns: number): string {
  return new Array(rows).fill(`(${sqlPlaceholders(columns)})`).join(', ');
}

/**
 * Rewrites portable `?` placeholders to Postgres `$1, $2, …`. Question marks inside string literals,
 * quoted identifiers, dollar-quoted bodies and comments are left alone. (Postgres's jsonb `?` operators
 * therefore cannot be written directly; use `jsonb_exists(…)` instead.)
 */
export function rewritePlaceholders(sql: string): string {
  const offsets = placeholderOffsets(sql);
  if (offsets.length === 0) return sql;
  let out = '';
  let copiedUpTo = 0;
  for (const [position, offset] of offsets.entries()) {
    out += `${sql.slice(copiedUpTo, offset)}$${position + 1}`;
    copiedUpTo = offset + 1;
  }
  return out + sql.slice(copiedUpTo);
}

const endsWithLimitKeyword = /(?:^|[^A-Za-z0-9_$])LIMIT\s*$/i;

/**
 * SQLite only: each `LIMIT ?` written as `LIMIT CAST(? AS INTEGER)`. Since SQLite 3.47 the planner reads a
 * bound LIMIT as the constant it holds, and so marks the statement to be compiled again whenever that
 * parameter is bound: a prepared statement with `LIMIT ?` is parsed and planned anew on every run (3–4 µs a
 * run in a tight loop, more inside a chat turn). A cast is not a plain parameter to the planner, which then
 * plans the statement once, as SQLite before 3.47 did every `LIMIT ?`; the value is read when the statement
 * runs. (The `LIMIT offset, count` form is not used here, so only the placeholder right after LIMIT is
 * concerned.)
 */
export function withLimitsReadAtRun(sql: string): string {
  let out = '';
  let copiedUpTo = 0;
  for (const offset of placeholderOffsets(sql)) {
    if (!endsWithLimitKeyword.test(sql.slice(Math.max(0, offset - 64), offset))) continue;
    out += `${sql.slice(copiedUpTo, offset)}CAST(? AS INTEGER)`;
    copiedUpTo = offset + 1;
  }
  return copiedUpTo === 0 ? sql : out + sql.slice(copiedUpTo);
}

/**
 * Where a statement's `?` placeholders are: question marks inside string literals, quoted identifiers,
 * dollar-quoted bodies and comments are not placeholders.
 */
function placeholderOffsets(sql: string): number[] {
  const offsets: number[] = [];
  let index = 0;
  const length = sql.length;
  while (index < length) {
    const char = sql[index]!;
    if (char === '?') {
      offsets.push(index);
      index++;
    } else if (char === "'" || char === '"') {
      index = skipQuoted(sql, index, char);
    } else if (char === '-' && sql[index + 1] === '-') {
      const end = sql.indexOf('\n', index);
      index = end < 0 ? length : end + 1;
    } else if (char === '/' && sql[index + 1] === '*') {
      const end = sql.indexOf('*/', index + 2);
      index = end < 0 ? length : end + 2;
    } else if (char === '$') {
      index = skipDollarQuoted(sql, index);
    } else {
      index++;
    }
  }
  return offsets;
}

/** Returns the index after the closing quote; a doubled quote is an escaped quote. */
function skipQuoted(sql: string, start: number, quote: string): number {
  let index = start + 1;
  while (index < sql.length) {
    if (sql[index] === quote) {
      if (sql[index + 1] === quote) index += 2;
      else return index + 1;
    } else index++;
  }
  return sql.length;
}

const dollarTag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/;

function skipDollarQuoted(sql: string, start: number): number {
  // `$1` style parameters and identifiers containing `$` are not quote openers.
  const previous = start > 0 ? sql[start - 1]! : ' ';
  if (/[A-Za-z0-9_]/.test(previous)) return start + 1;
  const match = dollarTag.exec(sql.slice(start, start + 64));
  if (!match) return start + 1;
  const tag = match[0];
  const end = sql.indexOf(tag, start + tag.length);
  return end < 0 ? sql.length : end + tag.length;
}

/** Caches rewrites by SQL text; queries are a small fixed set, so the cache stays small. */
export function createPlaceholderCache(maxEntries = 1_000): (sql: string) => string {
  const cache = new Map<string, string>();
  return (sql) => {
    let rewritten = cache.get(sql);
    if (rewritten === undefined) {
      rewritten = rewritePlaceholders(sql);
      if (cache.size >= maxEntries) cache.delete(cache.keys().next().value!);
      cache.set(sql, rewritten);
    }
    return rewritten;
  };
}
