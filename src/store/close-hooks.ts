import { once } from '../util/index.js';

/**
 * How a database closes (`SqlDatabase.close`, `SqlDatabase.onClose`): once, its hooks first, while its
 * connection still runs their statements, then `release` lets the connection go. Each hook runs once; one
 * added after closing began runs at once. Every `close` call returns the first one's promise, so a caller
 * whose `close` resolves knows the connection is gone even when another caller began closing first.
 */
export function createCloseHooks(release: () => Promise<void>): {
  add(hook: () => Promise<void> | void): void;
  close(): Promise<void>;
} {
  let hooks: Array<() => Promise<void> | void> | undefined = [];
  const settle = async (hook: () => Promise<void> | void): Promise<void> => {
    // A hook that fails must not keep the connection open.
    await Promise.resolve()
      .then(hook)
      .catch(() => undefined);
  };
  const closing = once(async () => {
    const pending = hooks ?? [];
    hooks = undefined;
    await Promise.all(pending.map(settle));
    await release();
  });
  return {
    add(hook) {
      if (hooks === undefined) void settle(hook);
      else hooks.push(hook);
    },
    close: closing.run,
  };
}
