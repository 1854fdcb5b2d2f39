export type ArtifactType = 'node_output' | 'tool_result' | 'telemetry_snapshot';

export interface Artifact {
  artifactId: string;
  rootTaskId: string;
  taskId: string;
  /** Undefined for task-level artifacts (telemetry snapshots). */
  nodeId: string | undefined;
  type: ArtifactType;
  createdAt: number;
  payload: unknown;
  metadata: Record<string, unknown>;
}

export interface ArtifactQuery {
  taskId?: string;
  rootTaskId?: string;
  nodeId?: string;
  type?: ArtifactType;
  /** Inclusive bounds on `createdAt`. */
  sinceMs?: number;
  untilMs?: number;
}

/**
 * Artifacts of the runs in this process, indexed by run and task; node and time queries filter those lists
 * (insertion order is time order). The engine forgets a run's artifacts when it stops retaining the run;
 * durable engines keep them in the database. No per-node index: keeping one would make forgetting a run
 * cost a scan of every retained artifact, on the hot path of every run.
 */
export interface ArtifactStore {
  add(artifact: Artifact): void;
  query(query: ArtifactQuery): Artifact[];
  forRun(rootTaskId: string): Artifact[];
  forget(rootTaskId: string): void;
}

export function createArtifactStore(): ArtifactStore {
  const byRun = new Map<string, Artifact[]>();
  const byTask = new Map<string, Artifact[]>();
  return {
    add(artifact) {
      const run = byRun.get(artifact.rootTaskId);
      if (run) run.push(artifact);
      else byRun.set(artifact.rootTaskId, [artifact]);
      const task = byTask.get(artifact.taskId);
      if (task) task.push(artifact);
      else byTask.set(artifact.taskId, [artifact]);
    },
    query(query) {
      const source =
        query.taskId !== undefined
          ? (byTask.get(query.taskId) ?? [])
          : query.rootTaskId !== undefined
            ? (byRun.get(query.rootTaskId) ?? [])
            : [...byRun.values()].flat();
      return source.filter(
        (artifact) =>
          (query.rootTaskId === undefined || artifact.rootTaskId === query.rootTaskId) &&
          (query.nodeId === undefined || artifact.nodeId === query.nodeId) &&
          (query.type === undefined || artifact.type === query.type) &&
          (query.sinceMs === undefined || artifact.createdAt >= query.sinceMs) &&
          (query.untilMs === undefined || artifact.createdAt <= query.untilMs),
      );
    },
    forRun: (rootTaskId) => (byRun.get(rootTaskId) ?? []).slice(),
    forget(rootTaskId) {
      const artifacts = byRun.get(rootTaskId);
      if (!artifacts) return;
      byRun.delete(rootTaskId);
      // Neighbouring artifacts mostly belong to the same task (every stage of a chain does): skip the
      // repeated deletes of one id.
      let last: string | undefined;
      for (const artifact of artifacts) {
        if (artifact.taskId === last) continue;
        last = artifact.taskId;
        byTask.delete(last);
      }
    },
  };
}
