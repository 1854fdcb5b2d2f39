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
  /** The id of a task other than a root task (a clone, a subtask) → its run. */
  readonly taskIndex: FreshMap<string, Run>;
  /** The run of any task (root, clone, subtask). */
  find(taskId: string): Run | undefined;
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
  // Finished runs in the order they finished, as a ring of `retainRuns` slots: each finish takes the
  // oldest's slot (shifting an array instead moved every entry on every run). It holds no run longer than
  // `runs` does.
  const finishedOrder: Array<Run | undefined> = [];
  let finishedCount = 0;
  const remove = (run: Run) => {
    const rootTaskId = run.root.taskId;
    runs.delete(rootTaskId);
    // Most runs are their root task alone, which only `runs` indexes.
    if (run.tasks.size > 1)
      for (const taskId of run.tasks.keys()) if (taskId !== rootTaskId) taskIndex.delete(taskId);
  };
  return {
    runs,
    taskIndex,
    find: (taskId) => runs.get(taskId) ?? taskIndex.get(taskId),
    add(run) {
      runs.set(run.root.taskId, run);
      // A run being started is its root task alone: no iterator over its tasks for nothing.
      if (run.tasks.size > 1)
        for (const taskId of run.tasks.keys()) if (taskId !== run.root.taskId) taskIndex.set(taskId, run);
    },
    remove,
    retire(run) {
      if (options.retainRuns <= 0) {
        remove(run);
        options.artifacts.forget(run.root.taskId);
        return;
      }
      const slot = finishedCount++ % options.retainRuns;
      const old = finishedOrder[slot];
      finishedOrder[slot] = run;
      if (!old) return;
      remove(old);
      options.artifacts.forget(old.root.taskId);
    },
  };
}
