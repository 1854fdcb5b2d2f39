import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { newRootTask, rootSpec } from '../../src/workflow/engine/run-state.js';
import { buildInspection } from '../../src/workflow/inspector.js';
import { createSqlRecordStore } from '../../src/workflow/record-store.js';
import {
  decodeArtifactColumns,
  decodeEvent,
  decodeRunRecords,
  decodeStageList,
  decodeStageRow,
  decodeStoredStage,
  decodeTask,
  encodeRunRecords,
  encodeStage,
  encodeStageFields,
  encodeStageList,
  encodeTask,
  type StageColumns,
  type TaskColumns,
  taskColumnsSql,
  taskRecordFields,
  workflowRecordVersion,
} from '../../src/workflow/records.js';
import type { StageRecord, WorkflowTask } from '../../src/workflow/task.js';
import type { TelemetryEvent } from '../../src/workflow/telemetry.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { insertRows as insertRowsInto, type StoredRow } from '../helpers/workflow-rows.js';
import { chainWorkflow, edge, engineFor, node, workflowYaml } from './helpers.js';

// The corpus: rows as each released version of the engine wrote them (a branch with a tolerated failure,
// a merge, and a run stopped by a decision), written by scripts/workflow-record-fixtures.ts. Every later
// version must keep reading all of them.
const corpusDir = join(import.meta.dirname, '..', 'fixtures', 'workflow-records');
const corpus = readdirSync(corpusDir)
  .filter((name) => name.endsWith('-rows.json'))
  .map((name) => ({
    name,
    rows: JSON.parse(readFileSync(join(corpusDir, name), 'utf8')) as Record<string, StoredRow[]>,
  }))
  .sort((a, b) => Number.parseInt(a.name.slice(1), 10) - Number.parseInt(b.name.slice(1), 10));

/** The first event of the current version's first run: its end records, on its root task's row. */
function eventOfTheCorpus(): TelemetryEvent {
  const root = corpus.at(-1)!.rows.workflow_tasks![0]!;
  return decodeRunRecords(String(root.run_records), String(root.task_id)).events[0]!;
}

/** The stages of the current version's first task: the list on its row (the batch that concluded it). */
function stagesOfTheCorpus(): StageRecord[] {
  const task = corpus.at(-1)!.rows.workflow_tasks![0]!;
  const stages: StageRecord[] = [];
  for (const stored of decodeStageList(String(task.stage_records), String(task.task_id)))
    stages.push(decodeStoredStage(stored, stages.at(-1)).stage);
  return stages;
}

/** The stage records of a file's rows, each decoded after the one before it in its task. */
function decodeStages(rows: StoredRow[]): StageRecord[] {
  const lastOfTask = new Map<string, StageRecord>();
  return rows.map((row) => {
    const { stage } = decodeStageRow(
      String(row.record),
      row as unknown as StageColumns,
      lastOfTask.get(String(row.task_id)),
    );
    lastOfTask.set(String(row.task_id), stage);
    return stage;
  });
}

/** A task row of a fixture file, decoded with its columns. */
const taskOf = (row: StoredRow): WorkflowTask =>
  decodeTask(String(row.record), row as unknown as TaskColumns);

/** The columns the row of `task` holds (as the record store writes them). */
const taskColumnsOf = (task: WorkflowTask): TaskColumns => ({
  task_id: task.taskId,
  root_task_id: task.rootTaskId,
  workflow_id: task.workflowId,
  parent_task_id: task.parentTaskId ?? null,
  lineage_type: task.lineageType ?? null,
  lifecycle: task.lifecycle,
  status: task.state,
  created_at: task.createdAt,
  updated_at: task.updatedAt,
  completed_at: task.completedAt ?? null,
});

const columnsOf = (stage: StageRecord): StageColumns => ({
  stage_index: stage.index,
  node_id: stage.nodeId,
  node_status: stage.nodeStatus,
  started_at: stage.startedAt,
  completed_at: stage.completedAt,
});

it('the corpus holds records of every version up to the current one', () => {
  expect(corpus.map((entry) => entry.name).sort()).toEqual(
    Array.from({ length: workflowRecordVersion + 1 }, (_, version) => `v${version}-rows.json`),
  );
});

for (const { name, rows } of corpus) {
  it(`${name}: every record decodes`, () => {
    for (const row of rows.workflow_tasks!) expect(taskOf(row).taskId).toBe(row.task_id);
    expect(decodeStages(rows.workflow_stages!).map((stage) => stage.nodeId)).toEqual(
      rows.workflow_stages!.map((row) => row.node_id),
    );
    for (const row of rows.workflow_events!) expect(decodeEvent(String(row.payload)).type).toBe(row.type);
    for (const row of rows.workflow_artifacts!)
      expect(decodeArtifactColumns(String(row.payload), String(row.metadata)).metadata).toBeTypeOf('object');
    for (const row of rows.workflow_tasks!) {
      if (row.stage_records !== undefined && row.stage_records !== null)
        expect(decodeStageList(String(row.stage_records), String(row.task_id)).length).toBeGreaterThan(0);
      if (row.run_records === undefined || row.run_records === null) continue;
      const records = decodeRunRecords(String(row.run_records), String(row.task_id));
      expect(records.events[0]!.type).toBe('task_queued');
      expect(records.artifacts.map((artifact) => artifact.type)).toContain('telemetry_snapshot');
    }
  });
}

it('writes the current version and never the fields it only holds in memory', () => {
  const [first, second] = decodeStages(corpus[0]!.rows.workflow_stages!);
  const written = JSON.parse(encodeStage(first!)) as Record<string, unknown>;
  expect(written.schemaVersion).toBe(workflowRecordVersion);
  expect(decodeStageRow(encodeStage(first!), columnsOf(first!)).stage).toEqual(first);
  // What the row's columns hold is not repeated.
  for (const key of ['index', 'nodeId', 'nodeStatus', 'startedAt', 'completedAt'])
    expect(written).not.toHaveProperty(key);
  const chained = { ...second!, input: first!.output };
  const text = encodeStage(chained, first, { eventSeqs: [3, 4] });
  // Sequence numbers that follow each other are written as the first.
  expect(JSON.parse(text)).toMatchObject({ inputFromPrevious: true, seq: 3 });
  for (const key of ['input', 'eventSeqs']) expect(JSON.parse(text)).not.toHaveProperty(key);
  expect(decodeStageRow(text, columnsOf(chained), first)).toEqual({
    stage: chained,
    extras: { eventSeqs: [3, 4] },
  });
});

it('refuses a version-2 record whose input is the output of a stage it was not given', () => {
  const [first, second] = decodeStages(corpus[0]!.rows.workflow_stages!);
  const text = encodeStage({ ...second!, input: first!.output }, first);
  expect(() => decodeStageRow(text, columnsOf(second!))).toThrow(
    expect.objectContaining({ code: 'JSON_UNDECODABLE' }),
  );
});

it("writes a task row's stage list without what follows from the entry before, and refuses one out of order or incomplete", () => {
  const [first, second] = decodeStages(corpus[0]!.rows.workflow_stages!);
  const entry = (stage: StageRecord, previous?: StageRecord, eventSeqs?: readonly [number, number]) => ({
    fields: encodeStageFields(stage, previous, eventSeqs ? { eventSeqs } : {}),
    columns: columnsOf(stage),
  });
  const decoded = (text: string) => {
    const stages: StageRecord[] = [];
    const extras: unknown[] = [];
    for (const stored of decodeStageList(text, 'wft_t')) {
      const read = decodeStoredStage(stored, stages.at(-1));
      stages.push(read.stage);
      extras.push(read.extras);
    }
    return { stages, extras };
  };
  // Consecutive indexes, a success, whole-number times and sequence numbers that follow each other: only the
  // first entry's index (when it is not 0), and the other status, say more than the node.
  const later = {
    ...second!,
    index: 1,
    nodeStatus: 'failure' as const,
    startedAt: first!.startedAt + 7,
    completedAt: first!.startedAt + 9,
  };
  const list = encodeStageList([
    entry({ ...first!, index: 0 }, undefined, [4, 5]),
    entry(later, first, [6, 9]),
  ]);
  const written = JSON.parse(list) as {
    schemaVersion: number;
    timesFrom: number;
    stages: Array<Record<string, unknown>>;
  };
  expect(written.schemaVersion).toBe(workflowRecordVersion);
  expect(written.timesFrom).toBe(first!.startedAt);
  expect(written.stages[0]).toMatchObject({
    nodeId: first!.nodeId,
    seq: 4,
    times: [0, first!.completedAt - first!.startedAt],
  });
  for (const key of ['schemaVersion', 'index', 'nodeStatus', 'startedAt', 'completedAt', 'eventSeqs'])
    expect(written.stages[0]).not.toHaveProperty(key);
  expect(written.stages[1]).toMatchObject({ nodeStatus: 'failure', times: [7, 2], eventSeqs: [6, 9] });
  expect(written.stages[1]).not.toHaveProperty('index');
  expect(decoded(list)).toEqual({
    stages: [{ ...first!, index: 0 }, later],
    extras: [{ eventSeqs: [4, 5] }, { eventSeqs: [6, 9] }],
  });
  // Indexes that do not follow each other, and times that are not whole numbers, are written as they are.
  const gapped = { ...later, index: 5, startedAt: later.startedAt + 0.5 };
  const text = encodeStageList([entry({ ...first!, index: 2 }), entry(gapped)]);
  expect((JSON.parse(text) as typeof written).stages.map((stage) => [stage.index, stage.startedAt])).toEqual([
    [2, undefined],
    [5, gapped.startedAt],
  ]);
  expect(decoded(text).stages).toEqual([{ ...first!, index: 2 }, gapped]);
  const undecodable = (message: string) =>
    expect.objectContaining({ code: 'JSON_UNDECODABLE', message: expect.stringContaining(message) });
  expect(() => decodeStageList(encodeStageList([entry(second!), entry(first!)]), 'wft_t')).toThrow(
    undecodable('not in order'),
  );
  expect(() => decodeStageList(list.replace('"times":[7,2],', ''), 'wft_t')).toThrow(
    undecodable('stage 1 lacks its index, node, status or times'),
  );
  // Up to version 4, a list was an array of entries that each held their index, node, status and times.
  expect(() => decodeStageList(`[${encodeStage(first!)}]`, 'wft_t')).toThrow(undecodable('lacks its index'));
  // A list from a newer build is refused, not misread.
  expect(() =>
    decodeStageList(list.replace(`"schemaVersion":${workflowRecordVersion}`, '"schemaVersion":99'), 'wft_t'),
  ).toThrow(undecodable('newer agentd'));
});

it("refuses to write a run's end records longer than a document may be read back", () => {
  const event = eventOfTheCorpus();
  const text = encodeRunRecords(event.rootTaskId, [event], []);
  expect(decodeRunRecords(text, event.rootTaskId).events).toEqual([event]);
  const bytes = Buffer.byteLength(text);
  expect(encodeRunRecords(event.rootTaskId, [event], [], bytes)).toBe(text);
  expect(() => encodeRunRecords(event.rootTaskId, [event], [], bytes - 1)).toThrow(
    expect.objectContaining({
      code: 'PAYLOAD_TOO_LARGE',
      message: expect.stringContaining(event.rootTaskId),
    }),
  );
});

/** A run's telemetry snapshot artifact, as `finishRun` makes it. */
const telemetrySnapshot = (root: string, metadata: Record<string, unknown>) => ({
  artifactId: `${root}:telemetry`,
  rootTaskId: root,
  taskId: root,
  nodeId: undefined,
  type: 'telemetry_snapshot' as const,
  createdAt: 1,
  payload: { events: 6 },
  metadata,
});

it("writes a run's end records without what the row and the document already say", () => {
  const root = 'wft_compact';
  const metadata = Object.freeze({ workflowId: 'flow' });
  const event = (seq: number, fields: Partial<TelemetryEvent> = {}): TelemetryEvent => ({
    eventId: `${root}:${seq}`,
    rootTaskId: root,
    taskId: root,
    stageId: undefined,
    type: 'task_queued',
    timestamp: 1_763_000_000_000 + seq,
    payload: { seq },
    metadata,
    ...fields,
  });
  const events = [
    event(1),
    event(2, { taskId: `${root}-clone-0`, stageId: 'fan', type: 'clone_created' }),
    // Ids the emitter does not make from the run's id and a number: kept as they are.
    event(3, { eventId: `${root}:03` }),
    event(4, { eventId: 'elsewhere:4', rootTaskId: 'elsewhere' }),
    event(5, { eventId: `${root}:q` }),
    event(6, { metadata: { workflowId: 'other-flow' } }),
    event(7, { eventId: 'wft_compacx:7' }),
    event(8, { eventId: `${root}:1234567890123456` }),
    event(9, { eventId: `${root}:0` }),
    // A time that is not a whole number is written as it is.
    event(10, { timestamp: 1_763_000_000_010.25 }),
  ];
  const artifacts = [
    telemetrySnapshot(root, { workflowId: 'flow' }),
    {
      artifactId: `${root}-clone-0:1:tool:0`,
      rootTaskId: root,
      taskId: `${root}-clone-0`,
      nodeId: 'left',
      type: 'tool_result' as const,
      createdAt: 2,
      payload: undefined,
      metadata: {},
    },
  ];
  const text = encodeRunRecords(root, events, artifacts);
  const written = JSON.parse(text) as {
    schemaVersion: number;
    workflowId: string;
    timesFrom: number;
    events: Array<Record<string, unknown>>;
    artifacts: Array<Record<string, unknown>>;
  };
  expect(written.schemaVersion).toBe(workflowRecordVersion);
  expect(written.workflowId).toBe('flow');
  expect(written.timesFrom).toBe(1_763_000_000_001);
  expect(written.events[0]).toEqual({ seq: 1, type: 'task_queued', at: 0, payload: { seq: 1 } });
  expect(written.events[1]).toHaveProperty('at', 1);
  expect(written.events.at(-1)).toMatchObject({ seq: 10, timestamp: 1_763_000_000_010.25 });
  expect(written.events.at(-1)).not.toHaveProperty('at');
  expect(written.events[1]).toMatchObject({ seq: 2, taskId: `${root}-clone-0`, stageId: 'fan' });
  expect(written.events[1]).not.toHaveProperty('rootTaskId');
  expect(written.events.slice(2, 5).map((stored) => [stored.eventId, stored.seq, stored.rootTaskId])).toEqual(
    [
      [`${root}:03`, undefined, undefined],
      ['elsewhere:4', undefined, 'elsewhere'],
      [`${root}:q`, undefined, undefined],
    ],
  );
  expect(written.events[5]).toMatchObject({ seq: 6, metadata: { workflowId: 'other-flow' } });
  expect(written.events.slice(6, 9).map((stored) => [stored.eventId, stored.seq])).toEqual([
    ['wft_compacx:7', undefined],
    [`${root}:1234567890123456`, undefined],
    [undefined, 0],
  ]);
  // The run's telemetry snapshot is named for its task; any other artifact writes its id.
  expect(written.artifacts.map((stored) => [stored.artifactId, stored.taskId])).toEqual([
    [undefined, undefined],
    [`${root}-clone-0:1:tool:0`, `${root}-clone-0`],
  ]);
  const read = decodeRunRecords(text, root);
  expect(read.events).toEqual(events);
  expect(read.artifacts).toEqual([artifacts[0], { ...artifacts[1], payload: null }]);
  // An event that names neither its id nor its sequence number cannot be read.
  const lost = text.replace('{"seq":1,', '{');
  expect(() => decodeRunRecords(lost, root)).toThrow(/event 0 has no id or sequence number/);
  // Nor one without metadata in a document that names no workflow.
  const unnamed = text.replace('"workflowId":"flow",', '');
  expect(() => decodeRunRecords(unnamed, root)).toThrow(/event 0 has no workflow/);
  // Nor an event whose time is an offset in a document that states none to add it to.
  const timeless = text.replace(`"timesFrom":${written.timesFrom},`, '');
  expect(() => decodeRunRecords(timeless, root)).toThrow(/event 0 has no time/);
  // A snapshot of another task, or an artifact of another type, keeps its id.
  const renamed = [
    { ...artifacts[0]!, artifactId: `${root}:snapshot` },
    { ...artifacts[0]!, type: 'tool_result' as const },
  ];
  expect(
    decodeRunRecords(encodeRunRecords(root, [], renamed), root).artifacts.map(
      (artifact) => artifact.artifactId,
    ),
  ).toEqual([`${root}:snapshot`, `${root}:telemetry`]);
});

it('writes a task record without its columns and defaults, and reads every field of it back', () => {
  /** What reading a task back gives: its JSON, as JSON.stringify writes it, with an empty history. */
  const asRead = (task: WorkflowTask) => JSON.parse(JSON.stringify({ ...task, history: [] })) as unknown;
  const tasks = corpus.flatMap(({ rows }) => rows.workflow_tasks!.map(taskOf));
  expect(tasks.length).toBeGreaterThan(8);
  const [first] = tasks;
  // Every field set to what is not its default, and the values JSON has no text for or writes otherwise.
  const full: WorkflowTask = {
    ...first!,
    spec: {
      ...first!.spec,
      taskSpecId: 'spec-of-another-id',
      input: { text: 'quote " backslash \\ line\nbreak \u2028', list: [1, undefined, () => 1] },
      mode: 'review',
      priority: 'high',
      hints: ['a hint'],
      files: ['a.txt', 'b "c".txt'],
      overrides: ['x=1'],
      metadata: { nested: { deep: [true, null] } },
    },
    currentStageId: 'fan',
    currentOutput: { when: new Date(0), skipped: undefined },
    routingTrace: [
      { from: 'start', to: 'pick', role: 'start' },
      { from: 'pick', to: 'fan', role: 'decision', label: 'go' },
      { from: 'fan', to: 'left', role: 'branch', label: 'l', childTaskId: 'wft_child' },
      { from: 'split', to: 'work', role: 'split', childTaskId: 'wft_subtask' },
    ],
    failureSignatures: ['right:NODE_FAILED'],
    parentTaskId: 'wft_parent',
    lineageType: 'clone',
    lineageMetadata: { cloneIndex: 0 },
    childTaskIds: ['wft_child'],
    fanOut: { nodeId: 'fan', role: 'branch' },
    arrivedAtMerge: 'join',
    toleratedFailure: true,
    error: { code: 'NODE_FAILED', message: 'it "broke"', nodeId: 'right' },
    completedAt: 1_763_000_000_123,
  };
  for (const task of [...tasks, full])
    expect(decodeTask(encodeTask(task), taskColumnsOf(task))).toEqual(asRead(task));
  // Every field of the record is written when it is not its default; none of the row's columns is.
  expect(Object.keys(JSON.parse(encodeTask(full))).sort()).toEqual(
    ['schemaVersion', ...taskRecordFields].sort(),
  );
  expect(Object.keys((JSON.parse(encodeTask(full)) as { spec: object }).spec).sort()).toEqual(
    Object.keys(full.spec).sort(),
  );
  // A task of defaults: a string input that is its request, its own id as the spec's, empty lists.
  const plain = newRootTask('flow', 1_763_000_000_000, 'wft_plain', rootSpec('wft_plain', 'hi'));
  expect(JSON.parse(encodeTask(plain))).toEqual({
    schemaVersion: workflowRecordVersion,
    spec: { input: 'hi' },
    routingTrace: [],
  });
  expect(decodeTask(encodeTask(plain), taskColumnsOf(plain))).toEqual(asRead(plain));
  // A value without JSON is left out, as JSON.stringify leaves it out.
  expect(JSON.parse(encodeTask({ ...full, currentOutput: () => 1 }))).not.toHaveProperty('currentOutput');
  // A version-5 record needs its row's columns, and reads them as a driver gives them (Postgres' BIGINT as digits).
  const columns = taskColumnsOf(full);
  const digits = { ...columns, created_at: String(full.createdAt), completed_at: String(full.completedAt) };
  expect(decodeTask(encodeTask(full), digits).createdAt).toBe(full.createdAt);
  const undecodable = (message: string) =>
    expect.objectContaining({ code: 'JSON_UNDECODABLE', message: expect.stringContaining(message) });
  expect(() => decodeTask(encodeTask(full), { ...columns, status: 'lost' } as never)).toThrow(
    undecodable('status'),
  );
  expect(() => decodeTask(encodeTask(full), { ...columns, created_at: '12abc' })).toThrow(
    undecodable('created_at'),
  );
  // A spec without a request and with an input that is not one cannot be read.
  const requestless = encodeTask(full).replace(/"request":"[^"]*",/, '');
  expect(() => decodeTask(requestless, columns)).toThrow(undecodable('neither a request nor an input'));
});

it("writes an artifact's metadata as it is when written, reusing only the JSON of what cannot change", () => {
  const root = 'wft_meta';
  const metadataOf = (metadata: Record<string, unknown>) =>
    decodeRunRecords(encodeRunRecords(root, [], [telemetrySnapshot(root, metadata)]), root).artifacts[0]!
      .metadata;
  const frozen = Object.freeze({ workflowId: 'flow', hashes: Object.freeze({ 'workflow.yaml': 'ab' }) });
  expect(metadataOf(frozen)).toEqual({ workflowId: 'flow', hashes: { 'workflow.yaml': 'ab' } });
  expect(metadataOf(frozen)).toEqual({ workflowId: 'flow', hashes: { 'workflow.yaml': 'ab' } });
  // Frozen on top only: what is inside may change between two runs' records.
  const inner: Record<string, string> = { 'workflow.yaml': 'ab' };
  const shallow = Object.freeze({ workflowId: 'flow', hashes: inner });
  expect(metadataOf(shallow).hashes).toEqual({ 'workflow.yaml': 'ab' });
  inner['workflow.yaml'] = 'cd';
  expect(metadataOf(shallow).hashes).toEqual({ 'workflow.yaml': 'cd' });
  // A getter may answer differently each time, frozen or not.
  let reads = 0;
  const counted = Object.freeze(
    Object.defineProperty({}, 'reads', { enumerable: true, get: () => ++reads }),
  ) as Record<string, unknown>;
  expect([metadataOf(counted).reads, metadataOf(counted).reads]).toEqual([1, 2]);
  // Not frozen: written as it is each time.
  const open: Record<string, unknown> = { workflowId: 'flow' };
  expect(metadataOf(open)).toEqual({ workflowId: 'flow' });
  open.workflowId = 'renamed';
  expect(metadataOf(open)).toEqual({ workflowId: 'renamed' });
});

it('refuses a stored record that lost a field, naming it', () => {
  const row = corpus.at(-1)!.rows.workflow_tasks![0]!;
  const { spec: _spec, ...broken } = JSON.parse(String(row.record)) as Record<string, unknown>;
  expect(() => decodeTask(JSON.stringify(broken), row as unknown as TaskColumns)).toThrow(
    expect.objectContaining({ code: 'JSON_UNDECODABLE', message: expect.stringContaining('spec') }),
  );
});

describeEachDatabase('workflow records of every version', (getDb) => {
  it('a batch of writes lands whole or not at all', async () => {
    const store = createSqlRecordStore(getDb());
    const rows = corpus.at(-1)!.rows;
    const task = taskOf(rows.workflow_tasks![0]!);
    const stage = stagesOfTheCorpus()[0]!;
    // A stage written twice: a row of its own twice (a running task), or twice in the list of the row that
    // concludes it.
    const running = {
      ...task,
      taskId: 'wft_running',
      rootTaskId: 'wft_running',
      lifecycle: 'active' as const,
    };
    for (const twice of [running, task]) {
      await expect(
        store.batch(async (writer) => {
          await writer.saveTask(twice);
          await writer.appendStage(twice, stage);
          await writer.appendStage(twice, stage);
        }),
      ).rejects.toThrow();
      expect(await store.loadRun(twice.taskId)).toBeUndefined();
    }
    await store.batch(async (writer) => {
      await writer.saveTask(task);
      await writer.appendStage(task, stage);
      await writer.saveRunRecords(task.taskId, [], []);
    });
    expect((await store.loadRun(task.taskId))?.tasks[0]?.history).toHaveLength(1);
  });

  it('a batch of many rows lands in order, with the last state of a task written twice', async () => {
    const store = createSqlRecordStore(getDb());
    const rows = corpus.at(-1)!.rows;
    const stored = taskOf(rows.workflow_tasks![0]!);
    const task = { ...stored, taskId: 'wft_many', rootTaskId: 'wft_many', parentTaskId: undefined };
    const template = stagesOfTheCorpus()[0]!;
    const event = eventOfTheCorpus();
    // 64 + 16 + 4 + 1 + 2: every statement size, and the remainder.
    const count = 87;
    const stages = Array.from({ length: count }, (_, index) => ({
      ...template,
      index,
      nodeId: `n${index}`,
      output: { index },
    }));
    const events = Array.from({ length: count }, (_, index) => ({
      ...event,
      eventId: `wft_many:${index + 1}`,
      rootTaskId: 'wft_many',
      taskId: 'wft_many',
    }));
    const artifacts = stages.map((stage) => ({
      artifactId: `wft_many:${stage.index}`,
      rootTaskId: 'wft_many',
      taskId: 'wft_many',
      nodeId: stage.nodeId,
      type: 'node_output' as const,
      // Read back by time, then id: distinct times keep the order of the numbered ids.
      createdAt: stage.completedAt + stage.index,
      payload: stage.output,
      metadata: { status: 'success' },
    }));
    await store.batch(async (writer) => {
      await writer.saveTask({ ...task, lifecycle: 'active', state: 'in_progress' });
      for (const stage of stages) await writer.appendStage(task, stage);
      await writer.saveTask({ ...task, lifecycle: 'concluded', state: 'completed' });
      await writer.saveRunRecords('wft_many', events, artifacts);
    });
    const run = await store.loadRun('wft_many');
    expect(run?.tasks).toHaveLength(1);
    expect([run!.tasks[0]!.lifecycle, run!.tasks[0]!.state]).toEqual(['concluded', 'completed']);
    expect(run!.tasks[0]!.history.map((stage) => stage.output)).toEqual(stages.map((stage) => stage.output));
    expect(run!.events.map((entry) => entry.eventId)).toEqual(events.map((entry) => entry.eventId));
    expect(run!.artifacts.map((entry) => entry.payload)).toEqual(artifacts.map((entry) => entry.payload));
    // A later batch updates the row the first one inserted, and leaves the run's end records on it.
    await store.batch(async (writer) => {
      await writer.saveTask({ ...task, lifecycle: 'concluded', state: 'failed' });
    });
    const updated = await store.loadRun('wft_many');
    expect(updated?.tasks[0]?.state).toBe('failed');
    expect(updated!.events.map((entry) => entry.eventId)).toEqual(events.map((entry) => entry.eventId));
  });

  it("a run's end records go onto its root task's row: in the batch writing it, a later one, or alone", async () => {
    const db = getDb();
    const store = createSqlRecordStore(db);
    const rows = corpus.at(-1)!.rows;
    const stored = taskOf(rows.workflow_tasks![0]!);
    const event = eventOfTheCorpus();
    const runOf = (id: string) => ({ ...stored, taskId: id, rootTaskId: id, parentTaskId: undefined });
    const eventOf = (id: string) => ({ ...event, eventId: `${id}:1`, rootTaskId: id, taskId: id });
    const artifactOf = (id: string) => ({
      artifactId: `${id}:telemetry`,
      rootTaskId: id,
      taskId: id,
      nodeId: undefined,
      type: 'telemetry_snapshot' as const,
      createdAt: 5,
      payload: { events: 1 },
      metadata: { workflowId: stored.workflowId },
    });
    // In one batch, with the root's row saved again after them: the row keeps them.
    await store.batch(async (writer) => {
      await writer.saveTask(runOf('wft_same'));
      await writer.saveRunRecords('wft_same', [eventOf('wft_same')], [artifactOf('wft_same')]);
      await writer.saveTask({ ...runOf('wft_same'), state: 'failed' });
    });
    // In a batch after the one writing the root's row, and through the store alone.
    await store.saveTask(runOf('wft_later'));
    await store.saveTask(runOf('wft_alone'));
    await store.batch((writer) =>
      writer.saveRunRecords('wft_later', [eventOf('wft_later')], [artifactOf('wft_later')]),
    );
    await store.saveRunRecords('wft_alone', [eventOf('wft_alone')], [artifactOf('wft_alone')]);
    for (const id of ['wft_same', 'wft_later', 'wft_alone']) {
      const run = await store.loadRun(id);
      expect(run!.events).toEqual([eventOf(id)]);
      expect(run!.artifacts).toEqual([artifactOf(id)]);
    }
    expect((await store.loadRun('wft_same'))!.tasks[0]!.state).toBe('failed');
    for (const table of ['workflow_events', 'workflow_artifacts']) {
      const count = await db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`);
      expect(Number(count!.n)).toBe(0);
    }
  });

  it("a task's stages: rows of their own while it runs, a list on the row that concludes it", async () => {
    const db = getDb();
    const store = createSqlRecordStore(db);
    const stored = taskOf(corpus.at(-1)!.rows.workflow_tasks![0]!);
    const task = { ...stored, taskId: 'wft_split', rootTaskId: 'wft_split', parentTaskId: undefined };
    const template = stagesOfTheCorpus()[0]!;
    // Each stage's input is the output before it, which a record leaves out: read across the two kinds.
    const stages = [0, 1, 2, 3].map((index) => ({
      ...template,
      index,
      nodeId: `n${index}`,
      input: index === 0 ? 'in' : { out: index - 1 },
      output: { out: index },
    }));
    for (let index = 1; index < stages.length; index++) stages[index]!.input = stages[index - 1]!.output;
    const running = { ...task, lifecycle: 'active' as const, state: 'in_progress' as const };
    await store.batch(async (writer) => {
      await writer.saveTask(running);
      await writer.appendStage({ ...running, history: stages.slice(0, 1) }, stages[0]!);
      await writer.appendStage({ ...running, history: stages.slice(0, 2) }, stages[1]!);
    });
    const concluded = {
      ...task,
      lifecycle: 'concluded' as const,
      state: 'completed' as const,
      history: stages,
    };
    await store.batch(async (writer) => {
      await writer.appendStage(concluded, stages[2]!);
      await writer.appendStage(concluded, stages[3]!);
      await writer.saveTask(concluded, { concludes: true });
    });
    const ownRows = await db.all<{ stage_index: number }>(
      'SELECT stage_index FROM workflow_stages WHERE root_task_id = ? ORDER BY stage_index',
      ['wft_split'],
    );
    expect(ownRows.map((row) => Number(row.stage_index))).toEqual([0, 1]);
    const row = await db.get<{ stage_records: string }>(
      'SELECT stage_records FROM workflow_tasks WHERE task_id = ?',
      ['wft_split'],
    );
    expect(decodeStageList(row!.stage_records, 'wft_split').map((entry) => entry.index)).toEqual([2, 3]);
    expect((await store.loadRun('wft_split'))!.tasks[0]!.history).toEqual(stages);
    // A later write of the task's row keeps its list.
    await store.saveTask({ ...concluded, state: 'failed' });
    expect((await store.loadRun('wft_split'))!.tasks[0]!.history).toEqual(stages);
  });

  it('makes the row of a task saved twice in a batch once, with its state when the batch lands', async () => {
    const db = getDb();
    const store = createSqlRecordStore(db);
    const stored = taskOf(corpus.at(-1)!.rows.workflow_tasks![0]!);
    let encoded = 0;
    const task = { ...stored, taskId: 'wft_twice', rootTaskId: 'wft_twice', parentTaskId: undefined };
    const trace = task.routingTrace;
    // JSON.stringify reads the getter once per encoding of the record.
    Object.defineProperty(task, 'routingTrace', {
      enumerable: true,
      get: () => {
        encoded++;
        return trace;
      },
    });
    await store.batch(async (writer) => {
      await writer.saveTask(task);
      task.state = 'completed';
      task.currentStageId = 'last-stage';
      await writer.saveTask(task, { concludes: true });
    });
    expect(encoded).toBe(1);
    const row = await db.get<TaskColumns & { record: string }>(
      `SELECT ${taskColumnsSql}, record FROM workflow_tasks WHERE task_id = ?`,
      ['wft_twice'],
    );
    expect(row!.status).toBe('completed');
    expect(decodeTask(row!.record, row!)).toMatchObject({ state: 'completed', currentStageId: 'last-stage' });
  });

  it('keeps stages as rows in a batch that finds its task concluded but does not write its conclusion', async () => {
    const db = getDb();
    const store = createSqlRecordStore(db);
    const stored = taskOf(corpus.at(-1)!.rows.workflow_tasks![0]!);
    const stages = stagesOfTheCorpus().slice(0, 1);
    const concluded = {
      ...stored,
      taskId: 'wft_late',
      rootTaskId: 'wft_late',
      parentTaskId: undefined,
      lifecycle: 'concluded' as const,
      state: 'completed' as const,
      history: stages,
    };
    // The start's write, run when its batch landed after the task had ended: the conclusion's own write, with
    // the last stages, comes in a later batch, whose list must not replace these.
    await store.batch(async (writer) => {
      await writer.saveTask(concluded);
      await writer.appendStage(concluded, stages[0]!);
    });
    const row = await db.get<{ stage_records: string | null }>(
      'SELECT stage_records FROM workflow_tasks WHERE task_id = ?',
      ['wft_late'],
    );
    expect(row!.stage_records).toBeNull();
    const ownRows = await db.all('SELECT 1 FROM workflow_stages WHERE task_id = ?', ['wft_late']);
    expect(ownRows).toHaveLength(1);
  });

  it("refuses a run's end records when its root task has no row, writing nothing", async () => {
    const db = getDb();
    const store = createSqlRecordStore(db);
    const rows = corpus.at(-1)!.rows;
    const stored = taskOf(rows.workflow_tasks![0]!);
    const task = { ...stored, taskId: 'wft_present', rootTaskId: 'wft_present', parentTaskId: undefined };
    const snapshot = {
      artifactId: 'wft_absent:telemetry',
      rootTaskId: 'wft_absent',
      taskId: 'wft_absent',
      nodeId: undefined,
      type: 'telemetry_snapshot' as const,
      createdAt: 5,
      payload: null,
      metadata: {},
    };
    const notFound = expect.objectContaining({
      code: 'NOT_FOUND',
      message: expect.stringContaining('wft_absent'),
    });
    await expect(store.saveRunRecords('wft_absent', [], [snapshot])).rejects.toThrow(notFound);
    await expect(
      store.batch(async (writer) => {
        await writer.saveTask(task);
        await writer.saveRunRecords('wft_absent', [], [snapshot]);
      }),
    ).rejects.toThrow(notFound);
    // The batch landed whole or not at all: the task it saved is not there either.
    expect(await store.loadRun('wft_present')).toBeUndefined();
    expect(await store.loadRun('wft_absent')).toBeUndefined();
  });

  const tables = ['workflow_tasks', 'workflow_stages', 'workflow_events', 'workflow_artifacts'];
  const insertRows = (rows: Record<string, StoredRow[]>) => insertRowsInto(getDb(), rows);

  it('the same runs stored as versions 1 to 5 read back the same', async () => {
    const db = getDb();
    const store = createSqlRecordStore(db);
    const versionOne = corpus.find((entry) => entry.name === 'v1-rows.json')!.rows;
    const versionTwo = corpus.find((entry) => entry.name === 'v2-rows.json')!.rows;
    const versionThree = corpus.find((entry) => entry.name === 'v3-rows.json')!.rows;
    const versionFour = corpus.find((entry) => entry.name === 'v4-rows.json')!.rows;
    const versionFive = corpus.find((entry) => entry.name === 'v5-rows.json')!.rows;
    // Version 5 writes the same rows as version 4, each of its texts shorter.
    const texts = (rows: Record<string, StoredRow[]>) =>
      rows.workflow_tasks!.map((row) =>
        [row.record, row.run_records, row.stage_records].map((text) => String(text ?? '').length),
      );
    for (const [index, lengths] of texts(versionFive).entries())
      for (const [column, length] of lengths.entries()) {
        const before = texts(versionFour)[index]![column]!;
        if (before === 0) expect(length).toBe(0);
        else expect(length).toBeLessThan(before);
      }
    // Version 4 writes the same rows as version 3, with shorter end records.
    expect(versionFour.workflow_tasks!.map((row) => String(row.run_records ?? '').length)).toEqual([
      expect.any(Number),
      0,
      0,
      expect.any(Number),
    ]);
    for (const [index, row] of versionFour.workflow_tasks!.entries())
      if (row.run_records)
        expect(String(row.run_records).length).toBeLessThan(
          String(versionThree.workflow_tasks![index]!.run_records).length * 0.65,
        );
    // Version 3 writes a run's end records on its root task's row, none in the tables of events and artifacts.
    expect([versionThree.workflow_events, versionThree.workflow_artifacts]).toEqual([[], []]);
    // Version 2 writes no row for what its stage rows stand for: node events and node_output artifacts.
    expect(versionTwo.workflow_events!.length).toBeLessThan(versionOne.workflow_events!.length);
    expect(versionTwo.workflow_artifacts!.map((row) => row.type)).toEqual([
      'telemetry_snapshot',
      'telemetry_snapshot',
    ]);
    const read = async (rows: Record<string, StoredRow[]>) => {
      for (const table of tables) await db.run(`DELETE FROM ${table}`);
      await insertRows(rows);
      const runs = [
        await store.loadRun('wft_fixture_branch-clone-1'),
        await store.loadRun('wft_fixture_halt'),
      ];
      // The fixture's workflow.yaml is written a little differently since version 1 (its hash differs).
      for (const run of runs) for (const artifact of run!.artifacts) delete artifact.metadata.manifestHashes;
      return runs;
    };
    const fromVersionOne = await read(versionOne);
    expect(fromVersionOne[0]!.events.map((event) => event.type)).toContain('node_failed');
    expect(await read(versionTwo)).toEqual(fromVersionOne);
    expect(await read(versionThree)).toEqual(fromVersionOne);
    expect(await read(versionFour)).toEqual(fromVersionOne);
    expect(await read(versionFive)).toEqual(fromVersionOne);
  });

  it('a run that never finished shows its stages, and no events or artifacts its stage rows stand for', async () => {
    const versionTwo = corpus.find((entry) => entry.name === 'v2-rows.json')!.rows;
    // The rows of a run whose end records (written when it finishes) never landed: a crash mid-run.
    await insertRows({
      workflow_tasks: versionTwo.workflow_tasks!,
      workflow_stages: versionTwo.workflow_stages!,
    });
    const run = await createSqlRecordStore(getDb()).loadRun('wft_fixture_branch');
    expect(run!.tasks[0]!.history.map((stage) => stage.nodeId)).toEqual([
      'start',
      'pick',
      'fan',
      'join',
      'done',
    ]);
    expect(run!.events).toEqual([]);
    expect(run!.artifacts).toEqual([]);
  });

  it('reads back what a record may lack: a run given no input, a subtask that never ran', async () => {
    const db = getDb();
    const { nodes, edges } = chainWorkflow(1);
    const chain = await engineFor({ 'workflow.yaml': workflowYaml(nodes, edges) }, { database: db });
    const noInput = await chain.run(undefined, { taskId: 'wft_no_input' });
    // A split cancelled while its first subtask runs: its second never ran.
    let running!: () => void;
    const started = new Promise<void>((resolve) => {
      running = resolve;
    });
    const split = await engineFor(
      {
        'workflow.yaml': workflowYaml(
          [node('start', 'start'), node('split', 'split'), node('work', 'linear'), node('done', 'exit')],
          [edge('start', 'split'), edge('split', 'work'), edge('work', 'done')],
        ),
      },
      {
        database: db,
        functions: {
          work: (_input: unknown, context: { signal: AbortSignal }) =>
            new Promise((_resolve, reject) => {
              running();
              context.signal.addEventListener('abort', () => reject(context.signal.reason));
            }),
        },
      },
    );
    const queued = split.enqueue(['first', 'never'], { taskId: 'wft_cut' });
    await started;
    expect(split.cancel(queued.taskId)).toBe(true);
    const cut = await queued.result;
    await Promise.all([chain.close(), split.close()]);
    const store = createSqlRecordStore(db);
    const read = await store.loadRun(noInput.taskId);
    expect(read?.tasks[0]).toMatchObject({ state: 'completed' });
    expect(read?.tasks[0]?.spec).toHaveProperty('input', undefined);
    const cutRun = await store.loadRun(cut.taskId);
    expect(cutRun?.tasks.map((task) => task.state)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    const neverRan = cutRun!.tasks.find((task) => task.taskId === 'wft_cut-subtask-1')!;
    expect(neverRan.currentOutput).toBeUndefined();
    expect(neverRan.history).toEqual([]);
  });

  for (const { name, rows } of corpus) {
    it(`${name}: a stored run reads back and inspects`, async () => {
      const db = getDb();
      await insertRows(rows);
      const store = createSqlRecordStore(db);
      const run = await store.loadRun('wft_fixture_branch-clone-1');
      expect(run?.tasks.map((task) => task.taskId)).toEqual([
        'wft_fixture_branch',
        'wft_fixture_branch-clone-0',
        'wft_fixture_branch-clone-1',
      ]);
      const report = buildInspection({
        taskId: 'wft_fixture_branch',
        ...run!,
        metadata: { workflowId: 'fixture-flow' } as never,
      })!;
      expect(report.summary.path).toEqual(['start', 'pick', 'fan', 'join', 'done']);
      expect(report.task.state).toBe('partial');
      expect(report.history.map((stage) => stage.nodeStatus)).toEqual([
        'success',
        'success',
        'success',
        'partial',
        'success',
      ]);
      const halted = await store.loadRun('wft_fixture_halt');
      expect(halted?.tasks[0]).toMatchObject({ state: 'completed', currentStageId: 'stop' });
      expect(halted?.events.at(-1)?.type).toBe('task_completed');
    });
  }
});
