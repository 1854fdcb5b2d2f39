import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { buildInspection } from '../../src/workflow/inspector.js';
import { createSqlRecordStore } from '../../src/workflow/record-store.js';
import {
  decodeArtifactColumns,
  decodeEvent,
  decodeStage,
  decodeTask,
  encodeStage,
  workflowRecordVersion,
} from '../../src/workflow/records.js';
import { describeEachDatabase } from '../helpers/databases.js';

// The corpus: rows as each released version of the engine wrote them (a branch with a tolerated failure,
// a merge, and a run stopped by a decision). Every later version must keep reading all of them.
const corpusDir = join(import.meta.dirname, '..', 'fixtures', 'workflow-records');
type Row = Record<string, string | number | null>;
const corpus = readdirSync(corpusDir)
  .filter((name) => name.endsWith('-rows.json'))
  .map((name) => ({
    name,
    rows: JSON.parse(readFileSync(join(corpusDir, name), 'utf8')) as Record<string, Row[]>,
  }));

it('the corpus holds records of every version up to the current one', () => {
  expect(corpus.map((entry) => entry.name).sort()).toEqual(
    Array.from({ length: workflowRecordVersion + 1 }, (_, version) => `v${version}-rows.json`),
  );
});

for (const { name, rows } of corpus) {
  it(`${name}: every record decodes`, () => {
    for (const row of rows.workflow_tasks!) expect(decodeTask(String(row.record)).taskId).toBe(row.task_id);
    for (const row of rows.workflow_stages!) expect(decodeStage(String(row.record)).nodeId).toBe(row.node_id);
    for (const row of rows.workflow_events!) expect(decodeEvent(String(row.payload)).type).toBe(row.type);
    for (const row of rows.workflow_artifacts!)
      expect(decodeArtifactColumns(String(row.payload), String(row.metadata)).metadata).toBeTypeOf('object');
  });
}

it('writes the current version and never the fields it only holds in memory', () => {
  const stage = decodeStage(String(corpus[0]!.rows.workflow_stages![0]!.record));
  const written = JSON.parse(encodeStage(stage)) as Record<string, unknown>;
  expect(written.schemaVersion).toBe(workflowRecordVersion);
  expect(decodeStage(encodeStage(stage))).toEqual(stage);
});

it('refuses a stored record that lost a field, naming it', () => {
  const row = corpus.at(-1)!.rows.workflow_tasks![0]!;
  const { spec: _spec, ...broken } = JSON.parse(String(row.record)) as Record<string, unknown>;
  expect(() => decodeTask(JSON.stringify(broken))).toThrow(
    expect.objectContaining({ code: 'JSON_UNDECODABLE', message: expect.stringContaining('spec') }),
  );
});

describeEachDatabase('workflow records of every version', (getDb) => {
  it('a batch of writes lands whole or not at all', async () => {
    const store = createSqlRecordStore(getDb());
    const rows = corpus.at(-1)!.rows;
    const task = decodeTask(String(rows.workflow_tasks![0]!.record));
    const stage = decodeStage(String(rows.workflow_stages![0]!.record));
    await expect(
      store.batch(async (writer) => {
        await writer.saveTask(task);
        await writer.appendStage(task, stage);
        await writer.appendStage(task, stage);
      }),
    ).rejects.toThrow();
    expect(await store.loadRun(task.taskId)).toBeUndefined();
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
    const stored = decodeTask(String(rows.workflow_tasks![0]!.record));
    const task = { ...stored, taskId: 'wft_many', rootTaskId: 'wft_many', parentTaskId: undefined };
    const template = decodeStage(String(rows.workflow_stages![0]!.record));
    const event = decodeEvent(String(rows.workflow_events![0]!.payload));
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
    // A later batch updates the row the first one inserted.
    await store.batch(async (writer) => {
      await writer.saveTask({ ...task, lifecycle: 'concluded', state: 'failed' });
    });
    expect((await store.loadRun('wft_many'))?.tasks[0]?.state).toBe('failed');
  });

  for (const { name, rows } of corpus) {
    it(`${name}: a stored run reads back and inspects`, async () => {
      const db = getDb();
      for (const [table, list] of Object.entries(rows)) {
        for (const row of list) {
          const columns = Object.keys(row);
          await db.run(
            `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`,
            columns.map((column) => row[column] ?? null),
          );
        }
      }
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
