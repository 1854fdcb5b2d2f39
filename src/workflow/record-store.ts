import type { SqlDatabase, SqlExecutor } from '../store/index.js';
import type { Artifact } from './artifacts.js';
import {
  decodeArtifactColumns,
  decodeEvent,
  decodeStage,
  decodeTask,
  encodeEvent,
  encodeStage,
  encodeTask,
} from './records.js';
import type { StageRecord, WorkflowTask } from './task.js';
import type { TelemetryEvent } from './telemetry.js';

/** A run as read back from the database: every task of it (root first), with events and artifacts. */
export interface PersistedRun {
  tasks: WorkflowTask[];
  events: TelemetryEvent[];
  artifacts: Artifact[];
}

/** The writes of a run: each as one statement, or as part of a batch (see `WorkflowRecordStore.batch`). */
export interface WorkflowRecordWriter {
  saveTask(task: WorkflowTask): Promise<void>;
  appendStage(task: WorkflowTask, stage: StageRecord): Promise<void>;
  saveRunRecords(
    rootTaskId: string,
    events: ReadonlyArray<TelemetryEvent>,
    artifacts: ReadonlyArray<Artifact>,
  ): Promise<void>;
}

/**
 * Durable record of workflow runs (migration 0006). Stage records are written as each stage completes;
 * task rows when a task starts, waits and concludes; events and artifacts at the end of the run. `inspect`
 * and `agentd inspect` read runs back, also from another process. The JSON columns are versioned and
 * read through `records.ts`.
 */
export interface WorkflowRecordStore extends WorkflowRecordWriter {
  /** Runs `work`'s writes in one transaction: all land or none do. */
  batch(work: (writer: WorkflowRecordWriter) => Promise<void>): Promise<void>;
  /** The run containing `taskId` (any task of it), or undefined. */
  loadRun(taskId: string): Promise<PersistedRun | undefined>;
  /** Most recent root tasks first. */
  listRuns(options?: {
    workflowId?: string;
    limit?: number;
  }): Promise<Array<{ taskId: string; workflowId: string; status: string; createdAt: number }>>;
}

/** Writes through `db`; `atomically` runs a group of statements as one transaction (or inside the current one). */
function createRecordWriter(
  db: SqlExecutor,
  atomically: (work: (tx: SqlExecutor) => Promise<void>) => Promise<void>,
): WorkflowRecordWriter {
  return {
    async saveTask(task) {
      await db.run(
        `INSERT INTO workflow_tasks (task_id, root_task_id, workflow_id, parent_task_id, lineage_type, lifecycle, status, record, created_at, updated_at, completed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (task_id) DO UPDATE SET lifecycle = excluded.lifecycle, status = excluded.status, record = excluded.record,
           updated_at = excluded.updated_at, completed_at = excluded.completed_at`,
        [
          task.taskId,
          task.rootTaskId,
          task.workflowId,
          task.parentTaskId ?? null,
          task.lineageType ?? null,
          task.lifecycle,
          task.state,
          encodeTask(task),
          task.createdAt,
          task.updatedAt,
          task.completedAt ?? null,
        ],
      );
    },
    async appendStage(task, stage) {
      await db.run(
        `INSERT INTO workflow_stages (task_id, stage_index, root_task_id, node_id, node_status, record, started_at, completed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          task.taskId,
          stage.index,
          task.rootTaskId,
          stage.nodeId,
          stage.nodeStatus,
          encodeStage(stage),
          stage.startedAt,
          stage.completedAt,
        ],
      );
    },
    async saveRunRecords(rootTaskId, events, artifacts) {
      if (events.length === 0 && artifacts.length === 0) return;
      await atomically(async (tx) => {
        for (const event of events) {
          await tx.run(
            'INSERT INTO workflow_events (event_id, root_task_id, task_id, seq, stage_id, type, at, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
            [
              event.eventId,
              rootTaskId,
              event.taskId,
              Number(event.eventId.slice(event.eventId.lastIndexOf(':') + 1)),
              event.stageId ?? null,
              event.type,
              event.timestamp,
              encodeEvent(event),
            ],
          );
        }
        for (const artifact of artifacts) {
          await tx.run(
            'INSERT INTO workflow_artifacts (artifact_id, root_task_id, task_id, node_id, type, created_at, payload, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
            [
              artifact.artifactId,
              rootTaskId,
              artifact.taskId,
              artifact.nodeId ?? null,
              artifact.type,
              artifact.createdAt,
              JSON.stringify(artifact.payload ?? null),
              JSON.stringify(artifact.metadata),
            ],
          );
        }
      });
    },
  };
}

export function createSqlRecordStore(db: SqlDatabase): WorkflowRecordStore {
  return {
    ...createRecordWriter(db, (work) => db.transaction(work)),
    batch: (work) => db.transaction((tx) => work(createRecordWriter(tx, (inner) => inner(tx)))),
    async loadRun(taskId) {
      const found = await db.get<{ root_task_id: string }>(
        'SELECT root_task_id FROM workflow_tasks WHERE task_id = ?',
        [taskId],
      );
      if (!found) return undefined;
      const root = found.root_task_id;
      const taskRows = await db.all<{ record: string }>(
        'SELECT record FROM workflow_tasks WHERE root_task_id = ? ORDER BY created_at, task_id',
        [root],
      );
      const stageRows = await db.all<{ task_id: string; record: string }>(
        'SELECT task_id, record FROM workflow_stages WHERE root_task_id = ? ORDER BY task_id, stage_index',
        [root],
      );
      const stagesByTask = new Map<string, StageRecord[]>();
      for (const row of stageRows) {
        const list = stagesByTask.get(row.task_id) ?? [];
        list.push(decodeStage(row.record));
        stagesByTask.set(row.task_id, list);
      }
      const tasks = taskRows.map((row) => {
        const task = decodeTask(row.record);
        task.history = stagesByTask.get(task.taskId) ?? [];
        task.stageResults = {};
        for (const stage of task.history) task.stageResults[stage.nodeId] = stage;
        return task;
      });
      tasks.sort((a, b) => (a.taskId === root ? -1 : b.taskId === root ? 1 : 0));
      const events = (
        await db.all<{ payload: string }>(
          'SELECT payload FROM workflow_events WHERE root_task_id = ? ORDER BY seq',
          [root],
        )
      ).map((row) => decodeEvent(row.payload));
      const artifacts = (
        await db.all<{
          artifact_id: string;
          task_id: string;
          node_id: string | null;
          type: Artifact['type'];
          created_at: number;
          payload: string;
          metadata: string;
        }>(
          'SELECT artifact_id, task_id, node_id, type, created_at, payload, metadata FROM workflow_artifacts WHERE root_task_id = ? ORDER BY created_at, artifact_id',
          [root],
        )
      ).map((row) => ({
        artifactId: row.artifact_id,
        rootTaskId: root,
        taskId: row.task_id,
        nodeId: row.node_id ?? undefined,
        type: row.type,
        createdAt: Number(row.created_at),
        ...decodeArtifactColumns(row.payload, row.metadata),
      }));
      return { tasks, events, artifacts };
    },
    async listRuns(options = {}) {
      const limit = options.limit ?? 20;
      const rows = options.workflowId
        ? await db.all<{ task_id: string; workflow_id: string; status: string; created_at: number }>(
            'SELECT task_id, workflow_id, status, created_at FROM workflow_tasks WHERE parent_task_id IS NULL AND workflow_id = ? ORDER BY created_at DESC LIMIT ?',
            [options.workflowId, limit],
          )
        : await db.all<{ task_id: string; workflow_id: string; status: string; created_at: number }>(
            'SELECT task_id, workflow_id, status, created_at FROM workflow_tasks WHERE parent_task_id IS NULL ORDER BY created_at DESC LIMIT ?',
            [limit],
          );
      return rows.map((row) => ({
        taskId: row.task_id,
        workflowId: row.workflow_id,
        status: row.status,
        createdAt: Number(row.created_at),
      }));
    },
  };
}
