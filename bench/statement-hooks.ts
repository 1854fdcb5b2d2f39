// Watching a tree's SQLite statements from a diagnostic, without touching agentd: better-sqlite3's `prepare`
// (and `exec`) on the driver's prototype are wrapped, so every statement prepared from then on runs its
// `run`, `get` and `all` through `around`. Shared by bench/chat-turn-timeline.ts and bench/workflow-commit-times.ts.

/** The part of better-sqlite3's Database prototype the hooks replace. */
export interface DriverPrototype {
  prepare: unknown;
  exec: unknown;
}

type Call = (...values: unknown[]) => unknown;

/**
 * Runs every call of a statement whose SQL `watched` accepts (at prepare time; every statement when left out)
 * and every `exec` of such SQL through `around(sql, call)`, which must return what `call()` returns.
 */
export function aroundStatements(
  prototype: DriverPrototype,
  around: (sql: string, call: () => unknown) => unknown,
  watched: (sql: string) => boolean = () => true,
): void {
  const prepare = prototype.prepare as (this: unknown, sql: string, ...rest: unknown[]) => unknown;
  prototype.prepare = function (this: unknown, sql: string, ...rest: unknown[]) {
    const statement = prepare.call(this, sql, ...rest) as Record<string, Call>;
    if (!watched(sql)) return statement;
    for (const method of ['run', 'get', 'all'] as const) {
      const original = statement[method];
      if (typeof original !== 'function') continue;
      statement[method] = function (this: unknown, ...values: unknown[]) {
        return around(sql, () => original.apply(this, values));
      };
    }
    return statement;
  };
  const exec = prototype.exec as (this: unknown, sql: string) => unknown;
  prototype.exec = function (this: unknown, sql: string) {
    return watched(sql) ? around(sql, () => exec.call(this, sql)) : exec.call(this, sql);
  };
}
