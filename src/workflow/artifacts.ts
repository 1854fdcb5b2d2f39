import { FreshMap } from './fresh-map.js';
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
 * Artifacts of the runs in this process, indexed by run and by task; node and time queries filter those
 * lists (insertion order is time order). A root task has no list of its own: its artifacts are those of its
 * run's list that name it (most runs are their root task alone, whose list would repeat the run's entry for
 * entry). The engine forgets a run's artifacts when it stops retaining the run; durable engines keep them in
 * the database. No per-node index: keeping one would make forgetting a run cost a scan of every retained
 * artifact, on the hot path of every run.
 */
export interface ArtifactStore {
  add(artifact: Artifact): void;
  /**
   * The `node_output` artifact of a stage of a root task whose output is stored as it is (no redaction):
   * kept as the stage record and built from it when read, since the record already holds all it says.
   */
  addRootStage(rootTaskId: string, stage: StageRecord): void;
  /**
   * An artifact of a root task made when it is first read (then kept): for what is computed from a run that
   * no longer changes, which most runs are never asked for.
   */
  addLater(rootTaskId: string, make: () => Artifact): void;
  query(query: ArtifactQuery): Artifact[];
  /** The run's artifacts; without `node_output` ones when `nodeOutputs` is false. */
  forRun(rootTaskId: string, nodeOutputs?: boolean): Artifact[];
  forget(rootTaskId: string): void;
}

/** An artifact of `addLater`: made on first read. */
class LaterArtifact {
  private made: Artifact | undefined;
  constructor(private readonly make: () => Artifact) {}
  get artifact(): Artifact {
    this.made ??= this.make();
    return this.made;
  }
}

type Entry = Artifact | StageRecord | LaterArtifact;
// A property read, not `in`: it stays a cheap inline-cached load on every shape of entry.
const isArtifact = (entry: Entry): entry is Artifact => (entry as Artifact).artifactId !== undefined;
/** A stage record standing for its `node_output` artifact. */
const isStage = (entry: Entry): entry is StageRecord => (entry as StageRecord).nodeRole !== undefined;

/**
 * The id of a task's telemetry snapshot, the artifact a run's end makes: a run's end records leave it out
 * when it is this (see `encodeRunRecords`).
 */
export const telemetrySnapshotId = (taskId: string): string => `${taskId}:telemetry`;

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
  if (isArtifact(entry)) return entry;
  return isStage(entry) ? stageArtifact(rootTaskId, rootTaskId, entry) : entry.artifact;
}

export function createArtifactStore(): ArtifactStore {
  // FreshMaps: a key per run comes and goes (see fresh-map.ts).
  const byRun = new FreshMap<string, Entry[]>();
  /** Tasks other than root tasks. */
  const byTask = new FreshMap<string, Entry[]>();
  // The lists appended to last: a run's stages come one after another, so most appends skip the lookups.
  const lastRun: LastList = { key: undefined, list: [] };
  const lastTask: LastList = { key: undefined, list: [] };
  const append = (index: FreshMap<string, Entry[]>, last: LastList, key: string, entry: Entry): void => {
    if (last.key === key) {
      last.list.push(entry);
      return;
    }
    let list = index.get(key);
    if (list) list.push(entry);
    else {
      list = [entry];
      index.set(key, list);
    }
    last.key = key;
    last.list = list;
  };
  const filtered = (entries: ReadonlyArray<Entry>, rootTaskId: string | undefined, query: ArtifactQuery) => {
    const out: Artifact[] = [];
    for (const entry of entries) {
      // Stage and later entries are only ever listed under their root task, so the list's key names their run.
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
      append(byRun, lastRun, artifact.rootTaskId, artifact);
      if (artifact.taskId !== artifact.rootTaskId) append(byTask, lastTask, artifact.taskId, artifact);
    },
    addRootStage(rootTaskId, stage) {
      append(byRun, lastRun, rootTaskId, stage);
    },
    addLater(rootTaskId, make) {
      append(byRun, lastRun, rootTaskId, new LaterArtifact(make));
    },
    query(query) {
      const { taskId } = query;
      if (taskId !== undefined) {
        const ofRun = byRun.get(taskId);
        if (!ofRun) return filtered(byTask.get(taskId) ?? [], taskId, query);
        // A root task: the entries of its run that name it (every stage and later entry does).
        return filtered(
          ofRun.filter((entry) => !isArtifact(entry) || entry.taskId === taskId),
          taskId,
          query,
        );
      }
      if (query.rootTaskId !== undefined)
        return filtered(byRun.get(query.rootTaskId) ?? [], query.rootTaskId, query);
      const out: Artifact[] = [];
      for (const [rootTaskId, entries] of byRun) out.push(...filtered(entries, rootTaskId, query));
      return out;
    },
    forRun(rootTaskId, nodeOutputs = true) {
      const out: Artifact[] = [];
      for (const entry of byRun.get(rootTaskId) ?? []) {
        if (isStage(entry)) {
          if (nodeOutputs) out.push(artifactOf(entry, rootTaskId));
        } else {
          const artifact = artifactOf(entry, rootTaskId);
          if (nodeOutputs || artifact.type !== 'node_output') out.push(artifact);
        }
      }
      return out;
    },
    forget(rootTaskId) {
      const entries = byRun.get(rootTaskId);
      if (!entries) return;
      // A forgotten list must not take appends again; whichever list was last is looked up anew.
      lastRun.key = undefined;
      lastTask.key = undefined;
      byRun.delete(rootTaskId);
      // No task but root tasks has artifacts (no run has had clones or subtasks since): nothing more to find.
      if (byTask.size === 0) return;
      // Other tasks are named by their artifacts, and neighbouring ones mostly belong to the same task
      // (every stage of a chain does): skip the repeated deletes of one id.
      let last = rootTaskId;
      for (const entry of entries) {
        if (!isArtifact(entry) || entry.taskId === last) continue;
        last = entry.taskId;
        byTask.delete(last);
      }
    },
  };
}

/** The list an index appended to last, and its key (undefined: none, look the next one up). */
interface LastList {
  key: string | undefined;
  list: Entry[];
}
