import type { StageRecord } from './task.js';

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
  /**
   * The `node_output` artifact of a stage of a root task whose output is stored as it is (no redaction):
   * kept as the stage record and built from it when read, since the record already holds all it says.
   */
  addRootStage(rootTaskId: string, stage: StageRecord): void;
  query(query: ArtifactQuery): Artifact[];
  /** The run's artifacts; without `node_output` ones when `nodeOutputs` is false. */
  forRun(rootTaskId: string, nodeOutputs?: boolean): Artifact[];
  forget(rootTaskId: string): void;
}

type Entry = Artifact | StageRecord;
// A property read, not `in`: it stays a cheap inline-cached load on both shapes of entry.
const isArtifact = (entry: Entry): entry is Artifact => (entry as Artifact).artifactId !== undefined;

/**
 * The `node_output` artifact of a stage of `taskId` whose output is kept as it is (no redaction): all of it
 * is in the stage record, so it is made from the record when read, in memory or from the database.
 */
export function stageArtifact(rootTaskId: string, taskId: string, stage: StageRecord): Artifact {
  return {
    artifactId: `${taskId}:${stage.index}`,
    rootTaskId,
    taskId,
    nodeId: stage.nodeId,
    type: 'node_output',
    createdAt: stage.completedAt,
    payload: stage.output,
    metadata: Object.freeze({ status: stage.nodeStatus, role: stage.nodeRole }),
  };
}

/** The artifact an entry stands for; `rootTaskId` is the run it was added under. */
function artifactOf(entry: Entry, rootTaskId: string): Artifact {
  return isArtifact(entry) ? entry : stageArtifact(rootTaskId, rootTaskId, entry);
}

export function createArtifactStore(): ArtifactStore {
  const byRun = new Map<string, Entry[]>();
  const byTask = new Map<string, Entry[]>();
  // The lists appended to last: a run's stages come one after another, so most appends skip the lookups.
  let lastRun: { key: string; list: Entry[] } | undefined;
  let lastTask: { key: string; list: Entry[] } | undefined;
  const append = (
    index: Map<string, Entry[]>,
    last: { key: string; list: Entry[] } | undefined,
    key: string,
    entry: Entry,
  ): { key: string; list: Entry[] } => {
    if (last?.key === key) {
      last.list.push(entry);
      return last;
    }
    let list = index.get(key);
    if (list) list.push(entry);
    else {
      list = [entry];
      index.set(key, list);
    }
    return { key, list };
  };
  const filtered = (entries: ReadonlyArray<Entry>, rootTaskId: string | undefined, query: ArtifactQuery) => {
    const out: Artifact[] = [];
    for (const entry of entries) {
      // A stage entry is only ever listed under its root task, so the list's key names its run.
      const artifact = artifactOf(entry, isArtifact(entry) ? entry.rootTaskId : rootTaskId!);
      if (
        (query.rootTaskId === undefined || artifact.rootTaskId === query.rootTaskId) &&
        (query.nodeId === undefined || artifact.nodeId === query.nodeId) &&
        (query.type === undefined || artifact.type === query.type) &&
        (query.sinceMs === undefined || artifact.createdAt >= query.sinceMs) &&
        (query.untilMs === undefined || artifact.createdAt <= query.untilMs)
      )
        out.push(artifact);
    }
    return out;
  };
  return {
    add(artifact) {
      lastRun = append(byRun, lastRun, artifact.rootTaskId, artifact);
      lastTask = append(byTask, lastTask, artifact.taskId, artifact);
    },
    addRootStage(rootTaskId, stage) {
      lastRun = append(byRun, lastRun, rootTaskId, stage);
      lastTask = append(byTask, lastTask, rootTaskId, stage);
    },
    query(query) {
      if (query.taskId !== undefined) return filtered(byTask.get(query.taskId) ?? [], query.taskId, query);
      if (query.rootTaskId !== undefined)
        return filtered(byRun.get(query.rootTaskId) ?? [], query.rootTaskId, query);
      const out: Artifact[] = [];
      for (const [rootTaskId, entries] of byRun) out.push(...filtered(entries, rootTaskId, query));
      return out;
    },
    forRun(rootTaskId, nodeOutputs = true) {
      const out: Artifact[] = [];
      for (const entry of byRun.get(rootTaskId) ?? []) {
        if (!isArtifact(entry)) {
          if (nodeOutputs) out.push(artifactOf(entry, rootTaskId));
        } else if (nodeOutputs || entry.type !== 'node_output') out.push(entry);
      }
      return out;
    },
    forget(rootTaskId) {
      const entries = byRun.get(rootTaskId);
      if (!entries) return;
      // A forgotten list must not take appends again; whichever list was last is looked up anew.
      lastRun = undefined;
      lastTask = undefined;
      byRun.delete(rootTaskId);
      // The root task's list holds every stage entry; other tasks are named by their artifacts, and
      // neighbouring ones mostly belong to the same task (every stage of a chain does): skip the repeated
      // deletes of one id.
      byTask.delete(rootTaskId);
      let last = rootTaskId;
      for (const entry of entries) {
        if (!isArtifact(entry) || entry.taskId === last) continue;
        last = entry.taskId;
        byTask.delete(last);
      }
    },
  };
}
