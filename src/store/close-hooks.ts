/**
 * How a database closes (`SqlDatabase.close`, `SqlDatabase.onClose`): once, its hooks first, while its
 * connection still runs their statements, then the connection. Each hook runs once; one added after closing
 * began runs at once.
 */
export function createCloseHooks(): {
  add(hook: () => Promise<void> | void): void;
  /**
   * Runs every hook added so far, and from then on each one added, then `release`. Only the first call closes:
   * every call returns its promise, so a caller whose `close` resolves knows the connection is gone even when
   * another caller began closing first.
   */
  close(release: () => Promise<void>): Promise<void>;
} {
  let hooks: Array<() => Promise<void> | void> | undefined = [];
  let closing: Promise<void> | undefined;
  const settle = async (hook: () => Promise<void> | void): Promise<void> => {
    // A hook that fails must not keep the connection open.
    await Promise.resolve()
      .then(hook)
      .catch(() => undefined);
  };
  const runHooks = async () => {
    const pending = hooks ?? [];
    hooks = undefined;
    await Promise.all(pending.map(settle));
  };
  return {
    add(hook) {
      if (hooks === undefined) void settle(hook);
      else hooks.push(hook);
    },
    close(release) {
      closing ??= runHooks().then(release);
      return closing;
    },
  };
}
