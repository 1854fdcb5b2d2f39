/**
 * What a database runs when it closes, before its connection goes (`SqlDatabase.onClose`): each hook once,
 * at once for one added after closing began.
 */
export function createCloseHooks(): {
  add(hook: () => Promise<void> | void): void;
  /** Runs every hook added so far, and from then on each one added; resolves once all have settled. */
  run(): Promise<void>;
} {
  let hooks: Array<() => Promise<void> | void> | undefined = [];
  const settle = async (hook: () => Promise<void> | void): Promise<void> => {
    // A hook that fails must not keep the connection open.
    await Promise.resolve()
      .then(hook)
      .catch(() => undefined);
  };
  return {
    add(hook) {
      if (hooks === undefined) void settle(hook);
      else hooks.push(hook);
    },
    async run() {
      const pending = hooks ?? [];
      hooks = undefined;
      await Promise.all(pending.map(settle));
    },
  };
}
