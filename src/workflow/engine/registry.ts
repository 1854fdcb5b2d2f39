import type { ArtifactStore } from '../artifacts.js';
import { FreshMap } from '../fresh-map.js';
import type { Run } from './run-state.js';

/**
 * The runs an engine keeps in memory: every run until it finishes, then the last `retainRuns` finished ones
 * (for `status` and `inspect`; older ones remain in the database when the engine is durable).
 */
export interface RunRegistry {
  /** Root task id → run. */
  readonly runs: FreshMap<string, Run>;
  /** Any task id (root, clone, subtask) → its run. */
  readonly taskIndex: FreshMap<string, Run>;
  add(run: Run): void;
  remove(run: Run): void;
  /** Records a finished run and forgets the oldest finished ones beyond the limit. */
  retire(run: Run): void;
}

export function createRunRegistry(options: {
  retainRuns: number;
  /** The index the engine's steps add clones and subtasks to. */
  taskIndex: FreshMap<string, Run>;
  artifacts: ArtifactStore;
}): RunRegistry {
  const runs = new FreshMap<string, Run>();
  const { taskIndex } = options;
  // The ids of finished runs in the order they finished, as a ring of `retainRuns` slots: each finish takes
  // the oldest's slot (shifting an array instead moved every id on every run).
  const finishedOrder: Array<string | undefined> = [];
  let finishedCount = 0;
  const remove = (run: Run) => {
    runs.delete(run.root.taskId);
    // Most runs are their root task alone: no iterator for those.
    if (run.tasks.size === 1) taskIndex.delete(run.root.taskId);
    else for (const taskId of run.tasks.keys()) taskIndex.delete(taskId);
  };
  return {
    runs,
    taskIndex,
    add(run) {
      runs.set(run.root.taskId, run);
      for (const taskId of run.tasks.keys()) taskIndex.set(taskId, run);
    },
    remove,
    retire(run) {
      if (options.retainRuns <= 0) {
        remove(run);
        options.artifacts.forget(run.root.taskId);
        return;
      }
      const slot = finishedCount++ % options.retainRuns;
      const evicted = finishedOrder[slot];
      finishedOrder[slot] = run.root.taskId;
      const old = evicted === undefined ? undefined : runs.get(evicted);
      if (!old) return;
      remove(old);
      options.artifacts.forget(old.root.taskId);
    },
  };
}
