import { afterEach, expect, it } from 'vitest';
import type { SqlDatabase } from '../../src/store/index.js';
import type {
  Artifact,
  InspectionReport,
  TelemetryEvent,
  WorkflowEngine,
  WorkflowFunction,
} from '../../src/workflow/index.js';
import { createSqlRecordStore } from '../../src/workflow/record-store.js';
import { decodeStageList } from '../../src/workflow/records.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { recordingReads } from '../helpers/query-plans.js';
import { planOf } from '../helpers/retention.js';
import { chainWorkflow, edge, engineFor, fanOutWorkflow, node, workflowYaml } from './helpers.js';

const engines: WorkflowEngine[] = [];
afterEach(async () => {
  await Promise.all(engines.splice(0).map((engine) => engine.close()));
});

interface Case {
  name: string;
  files: Record<string, unknown>;
  functions: Record<string, WorkflowFunction>;
  inputs: unknown[];
  /** Subscribes a listener, so the stage events are built as they happen instead of from the records. */
  listen?: boolean;
  env?: Record<string, string>;
  /** The run writes its node events and node_output artifacts as rows of their own (redacted copies). */
  rowsOfTheirOwn?: boolean;
}

const secret = 'sk-planted-SECRET-0123456789abcdef';

const branchMerge = fanOutWorkflow({
  fan: node('fan', 'branch'),
  arms: [
    { id: 'left', label: 'l' },
    { id: 'right', label: 'r' },
  ],
  join: node('join', 'merge', { merge_failure_mode: 'partial' }),
  after: ['tail'],
});
(branchMerge.nodes as Array<Record<string, unknown>>).find(
  (entry) => entry.id === 'right',
)!.continue_on_failure = true;

const cases: Case[] = [
  {
    name: 'a chain of functions',
    files: { 'workflow.yaml': workflowYaml(chainWorkflow(3).nodes, chainWorkflow(3).edges) },
    functions: {
      n1: (input) => ({ v: (input as { v: number }).v + 1 }),
      n2: async (input) => ({ v: (input as { v: number }).v * 2 }),
      n3: (input) => ({ v: (input as { v: number }).v - 1 }),
    },
    inputs: [{ v: 1 }, { v: 5 }],
  },
  {
    name: 'a chain whose middle node fails',
    files: { 'workflow.yaml': workflowYaml(chainWorkflow(3).nodes, chainWorkflow(3).edges) },
    functions: {
      n2: () => {
        throw new Error('n2 broke');
      },
    },
    inputs: ['x'],
  },
  {
    name: 'a branch with a tolerated failure, a merge and a node after it',
    files: { 'workflow.yaml': branchMerge },
    functions: {
      left: (input) => ({ left: input }),
      right: () => {
        throw new Error('right arm failed');
      },
      tail: (input) => ({ merged: input }),
    },
    inputs: ['go'],
  },
  {
    name: 'a split into subtasks without a merge',
    files: {
      'workflow.yaml': workflowYaml(
        [node('start', 'start'), node('split', 'split'), node('work', 'linear'), node('done', 'exit')],
        [edge('start', 'split'), edge('split', 'work'), edge('work', 'done')],
      ),
    },
    functions: {
      split: (input) => String(input).split(','),
      work: (input) => `did ${input}`,
    },
    inputs: ['a,b,c'],
  },
  {
    name: 'a decision, with a listener subscribed',
    files: {
      'workflow.yaml': workflowYaml(
        [node('start', 'start'), node('pick', 'decision'), node('yes', 'exit'), node('no', 'exit')],
        [edge('start', 'pick'), edge('pick', 'yes', 'yes'), edge('pick', 'no', 'no')],
      ),
    },
    functions: { pick: (input) => (input === 'y' ? 'yes' : 'no') },
    inputs: ['y', 'n'],
    listen: true,
  },
  {
    name: 'a chain with a credential to redact',
    files: {
      'workflow.yaml': workflowYaml(chainWorkflow(2).nodes, chainWorkflow(2).edges),
      'provider_credentials.yaml': {
        provider_credentials: [
          { id: 'key', provider: 'openai', auth: { type: 'api_key', source: 'env', env_var: 'TEST_KEY' } },
        ],
      },
    },
    functions: {
      n1: (input) => `${input} ${secret}`,
      n2: () => {
        throw new Error(`rejected ${secret}`);
      },
    },
    inputs: ['x'],
    env: { TEST_KEY: secret },
    rowsOfTheirOwn: true,
  },
];

/** The same workflow id in every engine of a case (it is otherwise named after its temp folder). */
const filesOf = (testCase: Case) => ({
  ...testCase.files,
  'workflow.yaml': { ...(testCase.files['workflow.yaml'] as object), id: 'durable-inspect' },
});

async function runAll(testCase: Case, database: SqlDatabase | undefined): Promise<WorkflowEngine> {
  const engine = await engineFor(filesOf(testCase), {
    functions: testCase.functions,
    ...(database ? { database } : {}),
    ...(testCase.env ? { env: testCase.env } : {}),
  });
  engines.push(engine);
  if (testCase.listen) engine.subscribe(() => {});
  for (const input of testCase.inputs) await engine.run(input);
  return engine;
}

/**
 * The database gives a run's artifacts by time, then id; in memory they are in the order they were made.
 * Both orders agree except among artifacts of one millisecond, so the comparison takes the database's.
 */
function byTimeThenId(report: InspectionReport | undefined): InspectionReport | undefined {
  if (!report) return report;
  const artifacts = [...report.artifacts].sort(
    (a, b) =>
      a.createdAt - b.createdAt || (a.artifactId < b.artifactId ? -1 : a.artifactId > b.artifactId ? 1 : 0),
  );
  return { ...report, artifacts };
}

describeEachDatabase('a durable run inspects from the database as it did in memory', (getDb) => {
  for (const testCase of cases) {
    it(testCase.name, async () => {
      const db = getDb();
      const inMemory = await runAll(testCase, undefined);
      const writer = await runAll(testCase, db);
      // A second engine on the same database: it retains nothing and reads every run back.
      const reader = await engineFor(filesOf(testCase), {
        database: db,
        ...(testCase.env ? { env: testCase.env } : {}),
      });
      engines.push(reader);
      const rootIds = ['wft_1', 'wft_2'].slice(0, testCase.inputs.length);
      for (const rootId of rootIds) {
        const expected = byTimeThenId(await inMemory.inspect(rootId));
        expect(expected).toBeDefined();
        expect(byTimeThenId(await writer.inspect(rootId))).toEqual(expected);
        const fromDatabase = await reader.inspect(rootId);
        expect(fromDatabase).toEqual(expected);
        for (const task of expected!.lineage)
          expect(await reader.inspect(task.taskId)).toEqual(
            byTimeThenId(await inMemory.inspect(task.taskId)),
          );
      }
      // A run's end records are one document on its root task's row (record version 3): no event or
      // artifact has a row of its own.
      for (const table of ['workflow_events', 'workflow_artifacts']) {
        const rows = await db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`);
        expect(Number(rows!.n)).toBe(0);
      }
      const endRecords = (
        await db.all<{ run_records: string }>(
          'SELECT run_records FROM workflow_tasks WHERE run_records IS NOT NULL',
        )
      ).map((row) => JSON.parse(row.run_records) as { events: TelemetryEvent[]; artifacts: Artifact[] });
      expect(endRecords).toHaveLength(rootIds.length);
      const nodeEvents = endRecords
        .flatMap((records) => records.events)
        .filter((event) => ['node_started', 'node_completed', 'node_failed'].includes(event.type));
      const nodeOutputs = endRecords
        .flatMap((records) => records.artifacts)
        .filter((artifact) => artifact.type === 'node_output');
      // The stages: rows of their own, and the lists on the rows that concluded their tasks.
      const stageRows = await db.all<{ record: string }>('SELECT record FROM workflow_stages');
      const stageLists = await db.all<{ task_id: string; stage_records: string }>(
        'SELECT task_id, stage_records FROM workflow_tasks WHERE stage_records IS NOT NULL',
      );
      const stages =
        stageRows.length +
        stageLists.reduce((sum, row) => sum + decodeStageList(row.stage_records, row.task_id).length, 0);
      expect(stages).toBeGreaterThan(0);
      if (testCase.rowsOfTheirOwn) {
        expect(nodeEvents).toHaveLength(2 * stages);
        expect(nodeOutputs).toHaveLength(stages);
        expect(JSON.stringify([stageRows, stageLists, endRecords])).not.toContain(secret);
      } else {
        expect(nodeEvents).toHaveLength(0);
        expect(nodeOutputs).toHaveLength(0);
      }
    });
  }
});

describeEachDatabase('a run read back finds its task rows through indexes', (getDb) => {
  it('reads the root by its key and its subtasks by an index that holds no root', async () => {
    const db = getDb();
    const split = cases.find((testCase) => testCase.name === 'a split into subtasks without a merge')!;
    const chain = cases.find((testCase) => testCase.name === 'a chain of functions')!;
    await runAll(split, db);
    const reader = await engineFor(filesOf(split), { database: db });
    engines.push(reader);
    const { db: reading, statements } = recordingReads(db);
    const run = await createSqlRecordStore(reading).loadRun('wft_1');
    expect(run!.tasks.map((task) => task.parentTaskId ?? 'root')).toEqual([
      'root',
      'wft_1',
      'wft_1',
      'wft_1',
    ]);
    const taskRead = statements.find((statement) =>
      statement.sql.includes('stage_records FROM workflow_tasks'),
    )!;
    const plan = await planOf(db, taskRead);
    if (db.dialect === 'sqlite') {
      expect(plan).toContain('USING INDEX sqlite_autoindex_workflow_tasks_1 (task_id=?)');
      expect(plan).toContain('USING INDEX workflow_child_tasks_by_root (root_task_id=?)');
      expect(plan).not.toMatch(/SCAN workflow_tasks/);
    } else {
      expect(plan).toContain('workflow_tasks_pkey');
      expect(plan).toContain('workflow_child_tasks_by_root');
      expect(plan).not.toMatch(/Seq Scan/);
    }
    // A root's row writes no entry of that index: a run without subtasks or clones writes only its key's.
    await runAll(chain, db);
    const entries = await db.get<{ n: number }>(
      'SELECT COUNT(*) AS n FROM workflow_tasks WHERE parent_task_id IS NOT NULL',
    );
    expect(Number(entries!.n)).toBe(3);
    const definition =
      db.dialect === 'sqlite'
        ? await db.get<{ sql: string }>(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'workflow_child_tasks_by_root'",
          )
        : await db.get<{ sql: string }>(
            "SELECT indexdef AS sql FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'workflow_child_tasks_by_root'",
          );
    expect(definition!.sql).toMatch(/WHERE \(?parent_task_id IS NOT NULL\)?/);
    const byRoot = await (db.dialect === 'sqlite'
      ? db.all<{ sql: string }>(
          "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'workflow_tasks' AND sql IS NOT NULL",
        )
      : db.all<{ sql: string }>(
          "SELECT indexdef AS sql FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'workflow_tasks'",
        ));
    for (const { sql } of byRoot)
      if (/\(root_task_id/.test(sql)) expect(sql).toMatch(/parent_task_id IS NOT NULL/);
  });
});

describeEachDatabase('a task that concludes while its earlier writes wait for the database', (getDb) => {
  it('keeps every stage: the batch that lands late writes the state it finds, and its stages stay rows', async () => {
    const db = getDb();
    // The first batch's transaction waits until the run has concluded (as one waits behind another writer's
    // commit): its writes then find the task concluded, though the writes of its end come in the next batch.
    let open: () => void = () => {};
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    let waited = false;
    const slow: SqlDatabase = {
      ...db,
      transaction: (async (work: never, options: never) => {
        if (!waited) {
          waited = true;
          await opened;
        }
        return db.transaction(work, options);
      }) as SqlDatabase['transaction'],
    };
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const engine = await engineFor(
      { 'workflow.yaml': workflowYaml(chainWorkflow(3).nodes, chainWorkflow(3).edges) },
      {
        database: slow,
        functions: {
          n1: (input) => input,
          n2: async (input) => {
            await gate;
            return input;
          },
          n3: (input) => input,
        },
      },
    );
    engines.push(engine);
    const ran = engine.run('x');
    // The first batch (the start and n1) is flushing; n2 ends, then the run.
    await new Promise((resolve) => setTimeout(resolve, 20));
    release();
    await new Promise((resolve) => setTimeout(resolve, 20));
    open();
    const result = await ran;
    expect(result.status).toBe('success');
    const reader = await engineFor(
      { 'workflow.yaml': workflowYaml(chainWorkflow(3).nodes, chainWorkflow(3).edges) },
      { database: db },
    );
    engines.push(reader);
    const report = await reader.inspect(result.taskId);
    expect(report?.history.map((stage) => stage.nodeId)).toEqual(['start', 'n1', 'n2', 'n3', 'exit']);
  });
});
