import { type SqlDatabase, type SqlExecutor, type SqlValue, sqlValueRows } from '../store/index.js';
import { ErrorCodes, SystemError } from '../util/index.js';
import { type Artifact, stageArtifact } from './artifacts.js';
import {
  decodeArtifactColumns,
  decodeEvent,
  decodeRunRecords,
  decodeStageList,
  decodeStageRow,
  decodeStoredStage,
  decodeTask,
  encodeRunRecords,
  encodeStageFields,
  encodeStageList,
  encodeTask,
  type StageColumns,
  stageRowRecord,
  type TaskColumns,
  taskColumnsSql,
  withinDocumentLimit,
} from './records.js';
import { type RunOwner, renewLease } from './run-owners.js';
import type { StageRecord, WorkflowTask } from './task.js';
import { stageEvent, type TelemetryEvent } from './telemetry.js';

/** A run as read back from the database: every task of it (root first), with events and artifacts. */
export interface PersistedRun {
  tasks: WorkflowTask[];
  events: TelemetryEvent[];
  artifacts: Artifact[];
}

/** The writes of a run: each as one statement, or as part of a batch (see `WorkflowRecordStore.batch`). */
export interface WorkflowRecordWriter {
  /**
   * `concludes`: the write of the task's conclusion, which its stages all precede. A write is run when its
   * batch lands, so an earlier one may already find the task concluded (its batch waited for the database
   * while the task ended): only the batch of this one takes the task's stages onto its row.
   */
  saveTask(task: WorkflowTask, options?: { concludes?: boolean }): Promise<void>;
  /**
   * With `startSeq` and `endSeq` (the sequence numbers of the stage's `node_started` and end event) the row
   * also stands for those two events and for the stage's `node_output` artifact, which `saveRunRecords` is
   * then not given: `loadRun` makes them from the record, once the run's end records are there.
   */
  appendStage(task: WorkflowTask, stage: StageRecord, startSeq?: number, endSeq?: number): Promise<void>;
  /**
   * The run's end records, written once when it finished, onto its root task's row (migration 0046): a
   * row each in `workflow_events` and `workflow_artifacts`, as before record version 3, made every run's
   * commit write those tables' B-trees too, about 7 of a 3-node chain's 17 WAL pages. Fails when the root
   * task has no row.
   */
  saveRunRecords(
    rootTaskId: string,
    events: ReadonlyArray<TelemetryEvent>,
    artifacts: ReadonlyArray<Artifact>,
  ): Promise<void>;
}

/**
 * Durable record of workflow runs (migration 0006). Stage records are written as each stage completes;
 * task rows when a task starts, waits and concludes; events and artifacts at the end of the run, except
 * those a stage row stands for (see `appendStage`): a stage is then one row instead of four. The end
 * records are one document on the root task's row (`saveRunRecords`), and the stages written with the row
 * that concludes their task a list on that row (see `stagesOnTaskRows`). `inspect` and `agentd inspect`
 * read runs back, also from another process. The JSON columns are versioned and read through
 * `records.ts`.
 */
export interface WorkflowRecordStore extends WorkflowRecordWriter {
  /**
   * Runs `work`'s writes in one transaction: all land or none do. `work` writes through `writer` only: the
   * transaction is not ambient (docs/storage.md), so a write through the store itself would not join it.
   */
  batch(work: (writer: WorkflowRecordWriter) => Promise<void>): Promise<void>;
  /** The run containing `taskId` (any task of it), or undefined. */
  loadRun(taskId: string): Promise<PersistedRun | undefined>;
  /** Most recent root tasks first. */
  listRuns(options?: {
    workflowId?: string;
    limit?: number;
  }): Promise<Array<{ taskId: string; workflowId: string; status: string; createdAt: number }>>;
}

// The rows of the four tables, as the statements below bind them.
function taskRow(task: WorkflowTask, ownerId: string | null): SqlValue[] {
  // The last two values are the run's end records (`saveRunRecords`) and the task's list of stages (see
  // `createBatchWriter`), which a task row is written without.
  return [
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
    ownerId,
    null,
    null,
  ];
}
const runRecordsColumn = 12;
const stageListColumn = 13;

function stageRow(task: WorkflowTask, stage: StageRecord, startSeq?: number, endSeq?: number): SqlValue[] {
  const row = openStageRow(task, stage, startSeq, endSeq);
  row[stageRecordColumn] = stageRowRecord(row[stageRecordColumn] as string);
  return row;
}

/**
 * A stage's row with its record's fields in place of the record (`encodeStageFields`): a batch makes them the
 * record when the stage gets a row of its own, and otherwise an entry of its task's list (see
 * `stagesOnTaskRows`).
 */
function openStageRow(
  task: WorkflowTask,
  stage: StageRecord,
  startSeq?: number,
  endSeq?: number,
): SqlValue[] {
  // The stage before it in the task, whose output may be this one's input (see `encodeStage`).
  const previous = stage.index > 0 ? task.history[stage.index - 1] : undefined;
  return [
    task.taskId,
    stage.index,
    task.rootTaskId,
    stage.nodeId,
    stage.nodeStatus,
    encodeStageFields(
      stage,
      previous,
      startSeq === undefined || endSeq === undefined ? undefined : { eventSeqs: [startSeq, endSeq] },
    ),
    stage.startedAt,
    stage.completedAt,
  ];
}
const stageRecordColumn = 5;

/** One table's INSERT, cut where its VALUES go, with the prepared texts for each number of rows. */
interface RowInsert {
  head: string;
  columns: number;
  tail: string;
  texts: Map<number, string>;
}

function rowInsert(head: string, columns: number, tail = ''): RowInsert {
  return { head, columns, tail, texts: new Map() };
}

const taskInsert = rowInsert(
  'INSERT INTO workflow_tasks (task_id, root_task_id, workflow_id, parent_task_id, lineage_type, lifecycle, status, record, created_at, updated_at, completed_at, owner_id, run_records, stage_records) VALUES',
  14,
  ` ON CONFLICT (task_id) DO UPDATE SET lifecycle = excluded.lifecycle, status = excluded.status, record = excluded.record,
           updated_at = excluded.updated_at, completed_at = excluded.completed_at,
           run_records = COALESCE(excluded.run_records, workflow_tasks.run_records),
           stage_records = COALESCE(excluded.stage_records, workflow_tasks.stage_records)`,
);
const stageInsert = rowInsert(
  'INSERT INTO workflow_stages (task_id, stage_index, root_task_id, node_id, node_status, record, started_at, completed_at) VALUES',
  8,
);

function insertText(insert: RowInsert, rows: number): string {
  let text = insert.texts.get(rows);
  if (text === undefined) {
    text = `${insert.head} ${sqlValueRows(rows, insert.columns)}${insert.tail}`;
    insert.texts.set(rows, text);
  }
  return text;
}

/**
 * Rows per statement, largest first. A statement per row costs a driver call, a bind and a step each (on
 * Postgres a round trip each); these few sizes keep the statement count of n rows under n/64 + 9 while only
 * four texts per table are ever prepared, so they stay in the driver's statement cache.
 */
const chunkSizes = [64, 16, 4, 1];

async function insertRows(
  db: SqlExecutor,
  insert: RowInsert,
  rows: ReadonlyArray<SqlValue[]>,
): Promise<void> {
  let next = 0;
  for (const size of chunkSizes) {
    while (rows.length - next >= size) {
      const params: SqlValue[] = [];
      for (let index = next; index < next + size; index++) {
        for (const value of rows[index]!) params.push(value);
      }
      await db.run(insertText(insert, size), params);
      next += size;
    }
  }
}

/**
 * Writes through `db`, a statement per record; `atomically` runs a group as one transaction. A task row
 * lands with its owner's lease renewed when that is due (see `RunOwner.renewalDue`).
 */
function createRecordWriter(
  db: SqlExecutor,
  atomically: (work: (tx: SqlExecutor) => Promise<void>) => Promise<void>,
  owner: RunOwner | undefined,
): WorkflowRecordWriter {
  const ownerId = owner?.id ?? null;
  return {
    async saveTask(task) {
      const renewal = owner?.renewalDue();
      if (renewal === undefined) {
        await insertRows(db, taskInsert, [taskRow(task, ownerId)]);
        return;
      }
      await atomically(async (tx) => {
        await renewLease(tx, owner!.id, renewal);
        await insertRows(tx, taskInsert, [taskRow(task, ownerId)]);
      });
      owner!.renewed(renewal);
    },
    async appendStage(task, stage, startSeq, endSeq) {
      await insertRows(db, stageInsert, [stageRow(task, stage, startSeq, endSeq)]);
    },
    async saveRunRecords(rootTaskId, events, artifacts) {
      if (events.length === 0 && artifacts.length === 0) return;
      await saveRunRecordsOn(db, rootTaskId, encodeRunRecords(rootTaskId, events, artifacts));
    },
  };
}

/** Writes a run's end records onto its root task's row, which must be there. */
async function saveRunRecordsOn(db: SqlExecutor, rootTaskId: string, text: string): Promise<void> {
  const { changes } = await db.run('UPDATE workflow_tasks SET run_records = ? WHERE task_id = ?', [
    text,
    rootTaskId,
  ]);
  if (changes === 0)
    throw new SystemError({
      code: ErrorCodes.notFound,
      message: `the end records of workflow run ${rootTaskId} have no task row to go on: its root task's row was not written`,
      details: { rootTaskId },
    });
}

/**
 * The writer of a batch: stage records and end records are encoded when written (so each shows the state it
 * had then) and their rows gathered per table, to be inserted together by `flush` inside the batch's
 * transaction; task rows are made at the flush. A task written twice in one batch is inserted once with its
 * last row — what the upsert would have left. A run's end
 * records go onto its root task's row when the batch writes that row too (as a run whose end lands in one
 * event-loop turn does): no statement of their own.
 */
function createBatchWriter(
  tx: SqlExecutor,
  ownerId: string | null,
): { writer: WorkflowRecordWriter; flush(): Promise<void> } {
  /**
   * The tasks the batch writes, each with the run's end records when it is the root, their rows made at the
   * flush (see `saveTask`).
   */
  const tasks = new Map<string, { task: WorkflowTask; runRecords: string | null }>();
  /** The tasks whose conclusion this batch writes (`saveTask`'s `concludes`). */
  const concluding = new Set<string>();
  const stages: SqlValue[][] = [];
  /** End records of runs whose root task's row this batch does not write: [root task id, text]. */
  const runRecordsOfOtherRows: Array<[string, string]> = [];
  return {
    writer: {
      async saveTask(task, options) {
        // A task's row is made once, at the flush, however many writes of it the batch has (a run that ends in
        // one event-loop turn saves its root as it starts and as it concludes): the writes of a batch all run
        // when it lands, and the last one's row is the one inserted, as the upsert would leave it.
        const earlier = tasks.get(task.taskId);
        tasks.set(task.taskId, { task, runRecords: earlier?.runRecords ?? null });
        if (options?.concludes) concluding.add(task.taskId);
      },
      async appendStage(task, stage, startSeq, endSeq) {
        stages.push(openStageRow(task, stage, startSeq, endSeq));
      },
      async saveRunRecords(rootTaskId, runEvents, runArtifacts) {
        if (runEvents.length === 0 && runArtifacts.length === 0) return;
        const text = encodeRunRecords(rootTaskId, runEvents, runArtifacts);
        const root = tasks.get(rootTaskId);
        if (root !== undefined) root.runRecords = text;
        else runRecordsOfOtherRows.push([rootTaskId, text]);
      },
    },
    async flush() {
      const rows = new Map<string, SqlValue[]>();
      for (const [taskId, { task, runRecords }] of tasks) {
        const row = taskRow(task, ownerId);
        row[runRecordsColumn] = runRecords;
        rows.set(taskId, row);
      }
      const ownStageRows = stagesOnTaskRows(rows, concluding, stages);
      await insertRows(tx, taskInsert, [...rows.values()]);
      await insertRows(tx, stageInsert, ownStageRows);
      for (const [rootTaskId, text] of runRecordsOfOtherRows) await saveRunRecordsOn(tx, rootTaskId, text);
    },
  };
}

/** Decodes a stored stage after `previous`, the stage before it in its task when that was read. */
type DecodeStage = (previous: StageRecord | undefined) => ReturnType<typeof decodeStageRow>;

/**
 * The stage rows of a batch (their records' fields in place of their records, see `openStageRow`) that get a
 * row of their own, with their records; the others go onto their task's row in `tasks` as its list of
 * stages (`encodeStageList`). A stage goes onto its
 * task's row when the batch writes the task's conclusion (`concluding`): its stages are then all written, so
 * the list is written once (like the run's end records), and the task's row is written in this commit anyway. A run whose stages all end in one event-loop turn
 * (pure functions) thus writes no stage row, which saved a 3-node chain's commit 3.6 of its 11.2 WAL pages.
 * A task still running gets stage rows, each landing as its stage ends, as before; so does one an earlier
 * write of this batch found concluded (its row's lifecycle says so) when its conclusion comes in a later
 * batch, whose list would otherwise replace this one.
 */
function stagesOnTaskRows(
  tasks: Map<string, SqlValue[]>,
  concluding: ReadonlySet<string>,
  stages: SqlValue[][],
): SqlValue[][] {
  if (stages.length === 0) return stages;
  const own: SqlValue[][] = [];
  const lists = new Map<
    SqlValue[],
    { entries: Array<{ fields: string; columns: StageColumns }>; lastIndex: number }
  >();
  for (let at = 0; at < stages.length; at++) {
    const row = stages[at]!;
    const taskId = row[0] as string;
    const stageIndex = row[1] as number;
    const fields = row[stageRecordColumn] as string;
    const task = concluding.has(taskId) ? tasks.get(taskId) : undefined;
    if (task === undefined) {
      row[stageRecordColumn] = stageRowRecord(fields);
      own.push(row);
      continue;
    }
    let list = lists.get(task);
    if (list === undefined) {
      list = { entries: [], lastIndex: -1 };
      lists.set(task, list);
    }
    // What the stage table's key refuses, the list refuses too: a stage written twice.
    if (stageIndex <= list.lastIndex)
      throw new SystemError({
        code: ErrorCodes.conflict,
        message: `stage ${stageIndex} of workflow task ${taskId} is written twice, or out of order`,
        details: { taskId, stageIndex },
      });
    list.lastIndex = stageIndex;
    list.entries.push({
      fields,
      columns: {
        stage_index: stageIndex,
        node_id: row[3] as string,
        node_status: row[4] as string,
        started_at: row[6] as number,
        completed_at: row[7] as number,
      },
    });
  }
  // Too long a list fails the batch, whose writes are then retried one by one: as rows of their own.
  for (const [task, list] of lists)
    task[stageListColumn] = withinDocumentLimit(
      encodeStageList(list.entries),
      `the stage list of workflow task ${task[0]}`,
    );
  return own;
}

/** Text order by UTF-16 code unit, which is byte order for the ASCII of ids. */
const compareText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The run's stored events with the stage events its stage rows stand for, in sequence order. */
function withStageEvents(
  stored: TelemetryEvent[],
  standIns: ReadonlyArray<{ taskId: string; stage: StageRecord; seqs: readonly [number, number] }>,
  rootTaskId: string,
  metadata: { workflowId: string },
): TelemetryEvent[] {
  const made: Array<{ seq: number; event: TelemetryEvent }> = [];
  for (const { taskId, stage, seqs } of standIns) {
    made.push({ seq: seqs[0], event: stageEvent(rootTaskId, taskId, stage, false, seqs[0], metadata) });
    made.push({ seq: seqs[1], event: stageEvent(rootTaskId, taskId, stage, true, seqs[1], metadata) });
  }
  made.sort((a, b) => a.seq - b.seq);
  const seqOf = (event: TelemetryEvent) => Number(event.eventId.slice(event.eventId.lastIndexOf(':') + 1));
  const out: TelemetryEvent[] = [];
  let next = 0;
  for (const event of stored) {
    const seq = seqOf(event);
    while (next < made.length && made[next]!.seq < seq) out.push(made[next++]!.event);
    out.push(event);
  }
  while (next < made.length) out.push(made[next++]!.event);
  return out;
}

/**
 * The run records in `db`. The task rows an engine writes name `owner`, the lease of the process running them
 * (migration 0042); a store given none only reads, or writes rows a sweep takes for a crashed process's.
 */
export function createSqlRecordStore(db: SqlDatabase, owner?: RunOwner): WorkflowRecordStore {
  const ownerId = owner?.id ?? null;
  return {
    // Not ambient: the writers issue every statement through `tx`, and the batch's writes only gather rows.
    ...createRecordWriter(db, (work) => db.transaction(work, { ambient: false }), owner),
    async batch(work) {
      const renewal = owner?.renewalDue();
      await db.transaction(
        async (tx) => {
          const batch = createBatchWriter(tx, ownerId);
          await work(batch.writer);
          if (renewal !== undefined) await renewLease(tx, owner!.id, renewal);
          await batch.flush();
        },
        { ambient: false },
      );
      if (renewal !== undefined) owner!.renewed(renewal);
    },
    async loadRun(taskId) {
      const found = await db.get<{ root_task_id: string }>(
        'SELECT root_task_id FROM workflow_tasks WHERE task_id = ?',
        [taskId],
      );
      if (!found) return undefined;
      const root = found.root_task_id;
      const stageRows = await db.all<StageColumns & { task_id: string; record: string }>(
        'SELECT task_id, stage_index, node_id, node_status, started_at, completed_at, record FROM workflow_stages WHERE root_task_id = ? ORDER BY task_id, stage_index',
        [root],
      );
      // Runs written before record version 3 keep their end records in these two tables.
      const eventRows = await db.all<{ payload: string }>(
        'SELECT payload FROM workflow_events WHERE root_task_id = ? ORDER BY seq',
        [root],
      );
      const artifactRows = await db.all<{
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
      );
      // The task rows last: the retention deletes a run whole in one transaction, so task rows still there
      // mean the reads before began before it, and saw the run whole too; none mean it went meanwhile. The
      // root by its key, its clones and subtasks by `workflow_child_tasks_by_root` (migration 0047).
      const taskRows = await db.all<
        TaskColumns & { record: string; run_records: string | null; stage_records: string | null }
      >(
        `SELECT ${taskColumnsSql}, record, run_records, stage_records FROM workflow_tasks WHERE task_id = ? OR (root_task_id = ? AND parent_task_id IS NOT NULL) ORDER BY created_at, task_id`,
        [root, root],
      );
      if (taskRows.length === 0) return undefined;
      // A task's stages: rows of their own, then (from the batch that concluded it) the list on its row.
      const storedByTask = new Map<string, Array<{ index: number; decode: DecodeStage }>>();
      const storedOf = (taskId: string) => {
        let list = storedByTask.get(taskId);
        if (!list) {
          list = [];
          storedByTask.set(taskId, list);
        }
        return list;
      };
      for (const row of stageRows)
        storedOf(row.task_id).push({
          index: Number(row.stage_index),
          decode: (previous) => decodeStageRow(row.record, row, previous),
        });
      for (const row of taskRows) {
        if (!row.stage_records) continue;
        const list = storedOf(row.task_id);
        for (const stored of decodeStageList(row.stage_records, row.task_id))
          list.push({ index: stored.index!, decode: (previous) => decodeStoredStage(stored, previous) });
        list.sort((a, b) => a.index - b.index);
      }
      const stagesByTask = new Map<string, StageRecord[]>();
      /** Stages whose records stand for their events and artifact, with those events' sequence numbers. */
      const standIns: Array<{ taskId: string; stage: StageRecord; seqs: readonly [number, number] }> = [];
      for (const [taskId, stored] of storedByTask) {
        const list: StageRecord[] = [];
        stagesByTask.set(taskId, list);
        for (const { index, decode } of stored) {
          const last = list.at(-1);
          const { stage, extras } = decode(last && last.index === index - 1 ? last : undefined);
          list.push(stage);
          if (extras.eventSeqs) standIns.push({ taskId, stage, seqs: extras.eventSeqs });
        }
      }
      const tasks = taskRows.map((row) => {
        const task = decodeTask(row.record, row);
        task.history = stagesByTask.get(task.taskId) ?? [];
        return task;
      });
      tasks.sort((a, b) => (a.taskId === root ? -1 : b.taskId === root ? 1 : 0));
      let events = eventRows.map((row) => decodeEvent(row.payload));
      let artifacts = artifactRows.map(
        (row): Artifact => ({
          artifactId: row.artifact_id,
          rootTaskId: root,
          taskId: row.task_id,
          nodeId: row.node_id ?? undefined,
          type: row.type,
          createdAt: Number(row.created_at),
          ...decodeArtifactColumns(row.payload, row.metadata),
        }),
      );
      const endRecords = taskRows.find((row) => row.task_id === root)?.run_records;
      if (endRecords) {
        const stored = decodeRunRecords(endRecords, root);
        events = events.concat(stored.events);
        artifacts = artifacts.concat(stored.artifacts);
      }
      // The events and artifacts a run's stage rows stand for belong to its end records, written when the
      // run finished: a run that never finished (a crash) shows neither, as before rows stood for them.
      if (standIns.length > 0 && artifacts.some((artifact) => artifact.type === 'telemetry_snapshot')) {
        const metadata = { workflowId: tasks[0]!.workflowId };
        events = withStageEvents(events, standIns, root, metadata);
        for (const { taskId, stage } of standIns) artifacts.push(stageArtifact(root, taskId, stage));
      }
      // In time order, as the artifact rows were read.
      artifacts.sort((a, b) => a.createdAt - b.createdAt || compareText(a.artifactId, b.artifactId));
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
