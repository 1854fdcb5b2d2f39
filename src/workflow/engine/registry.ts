import type { ArtifactStore } from '../artifacts.js';
import type { Run } from './run-state.js';

/**
 * The runs an engine keeps in memory: every run until it finishes, then the last `retainRuns` finished ones
 * (for `status` and `inspect`; older ones remain in the database when the engine is durable).
 */
export interface RunRegistry {
  /** Root task id → run. */
  readonly runs: Map<string, Run>;
  /** Any task id (root, clone, subtask) → its run. */
  readonly taskIndex: Map<string, Run>;
  add(run: Run): void;
  remove(run: Run): void;
  /** Records a finished run and forgets the oldest finished ones beyond the limit. */
  retire(run: Run): void;
}

export function createRunRegistry(options: {
  retainRuns: number;
  /** The index the engine's steps add clones and subtasks to. */
  taskIndex: Map<string, Run>;
  artifacts: ArtifactStore;
}): RunRegistry {
  const runs = new Map<string, Run>();
  const { taskIndex } = options;
  const finishedOrder: string[] = [];
  const remove = (run: Run) => {
    runs.delete(run.root.taskId);
    for (const taskId of run.tasks.keys()) taskIndex.delete(taskId);
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
      finishedOrder.push(run.root.taskId);
      while (finishedOrder.length > options.retainRuns) {
        const old = runs.get(finishedOrder.shift()!);
        if (!old) continue;
        remove(old);
        options.artifacts.forget(old.root.taskId);
      }
    },
  };
}
