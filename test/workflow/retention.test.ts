import { afterEach, describe, expect, it, vi } from 'vitest';
import { workflowsConfigSchema } from '../../src/runtime/workflow-methods.js';
import type { SqlDatabase, SqlExecutor } from '../../src/store/index.js';
import { createManualClock, createSequentialIdGenerator, ErrorCodes } from '../../src/util/index.js';
import { createWorkflowRetention, type WorkflowEngine } from '../../src/workflow/index.js';
import { createSqlRecordStore } from '../../src/workflow/record-store.js';
import { endedTaskStates, outcomeOf, taskStates } from '../../src/workflow/task.js';
import { counted, describeEachDatabase } from '../helpers/databases.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';
import { capturingLogger, dayMs, eventually, now, planOf, recording, watched } from '../helpers/retention.js';
import { chainWorkflow, edge, engineFor, fanOutWorkflow, node, workflowYaml } from './helpers.js';

const runTables = ['workflow_tasks', 'workflow_stages', 'workflow_events', 'workflow_artifacts'] as const;

// Every shape of run: a chain, a branch into clones joined by a merge, a split into subtasks.
const chain = { 'workflow.yaml': workflowYaml(chainWorkflow(2).nodes, chainWorkflow(2).edges) };
const branch = {
  'workflow.yaml': fanOutWorkflow({
    fan: node('fan', 'branch'),
    arms: [
      { id: 'left', label: 'l' },
      { id: 'right', label: 'r' },
    ],
    join: node('join', 'merge'),
  }),
};
const split = {
  'workflow.yaml': workflowYaml(
    [node('start', 'start'), node('split', 'split'), node('work', 'linear'), node('done', 'exit')],
    [edge('start', 'split'), edge('split', 'work'), edge('work', 'done')],
  ),
};

/** Runs of every engine of a test, each run at the time its clock says; one id sequence for them all. */
function runsOn(db: SqlDatabase) {
  const clock = createManualClock(now);
  const idGenerator = createSequentialIdGenerator();
  const engines: WorkflowEngine[] = [];
  const engineOf = async (files: Record<string, unknown>, functions = {}) => {
    // retainRuns 0: what the engine answers comes from the database.
    const engine = await engineFor(files, { database: db, clock, idGenerator, functions, retainRuns: 0 });
    engines.push(engine);
    return engine;
  };
  return {
    clock,
    engineOf,
    /** A run of `files` that ended `ageMs` before `now`: its root task id. */
    async endedAgo(files: Record<string, unknown>, ageMs: number, input: unknown = ['a', 'b']) {
      const engine = await engineOf(files);
      clock.set(now - ageMs);
      const result = await engine.run(input);
      clock.set(now);
      return result.taskId;
    },
    close: () => Promise.all(engines.map((engine) => engine.close())),
  };
}

/** The rows each run table holds for the run of `root`. */
async function rowsOf(db: SqlExecutor, root: string): Promise<Record<string, number>> {
  const rows: Record<string, number> = {};
  for (const table of runTables) {
    const row = await db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table} WHERE root_task_id = ?`, [
      root,
    ]);
    rows[table] = Number(row?.n ?? 0);
  }
  return rows;
}

const noRows = Object.fromEntries(runTables.map((table) => [table, 0]));

/**
 * A stage row, an event row and an artifact row of the run of `root`, as builds before record version 3
 * stored a run's stages and end records (this build writes a task's stages from the batch that concludes
 * it, and the end records, on task rows): the prune must delete those rows too.
 */
async function addRowsOfAnEarlierBuild(db: SqlExecutor, root: string): Promise<void> {
  await db.run(
    `INSERT INTO workflow_stages (task_id, stage_index, root_task_id, node_id, node_status, record, started_at, completed_at)
      VALUES (?, 1000, ?, 'earlier', 'success', ?, 0, 0)`,
    [
      root,
      root,
      JSON.stringify({
        schemaVersion: 2,
        nodeRole: 'linear',
        nodeKind: 'deterministic',
        contextProfileId: 'none',
      }),
    ],
  );
  await db.run(
    `INSERT INTO workflow_events (event_id, root_task_id, task_id, seq, stage_id, type, at, payload)
      VALUES (?, ?, ?, 1000, NULL, 'task_queued', 0, ?)`,
    [
      `${root}:1000`,
      root,
      root,
      JSON.stringify({
        schemaVersion: 2,
        eventId: `${root}:1000`,
        rootTaskId: root,
        taskId: root,
        type: 'task_queued',
        timestamp: 0,
        payload: {},
        metadata: { workflowId: 'earlier' },
      }),
    ],
  );
  await db.run(
    `INSERT INTO workflow_artifacts (artifact_id, root_task_id, task_id, node_id, type, created_at, payload, metadata)
      VALUES (?, ?, ?, NULL, 'telemetry_snapshot', 0, '{}', '{}')`,
    [`${root}:earlier`, root, root],
  );
}

async function tasksOf(db: SqlExecutor, root: string): Promise<string[]> {
  const rows = await db.all<{ task_id: string }>(
    'SELECT task_id FROM workflow_tasks WHERE root_task_id = ? ORDER BY task_id',
    [root],
  );
  return rows.map((row) => row.task_id);
}

/** `db` whose transactions fail at the first statement that matches `failing`, after the ones before it ran. */
function failingWithin(db: SqlDatabase, failing: RegExp): SqlDatabase {
  const refuse = (sql: string) => {
    if (failing.test(sql)) throw new Error(`refused: ${sql.slice(0, 40)}`);
  };
  return {
    ...db,
    transaction: (work, options) => db.transaction((tx) => work(watched(tx, refuse)), options),
  };
}

describeEachDatabase('workflow retention', (getDb) => {
  let runs: ReturnType<typeof runsOn>;
  afterEach(async () => {
    vi.useRealTimers();
    await runs?.close();
  });

  it('deletes every row of the runs that ended before the cutoff, clones and subtasks too, and keeps the rest', async () => {
    const db = getDb();
    runs = runsOn(db);
    const gone = [
      await runs.endedAgo(chain, 40 * dayMs, { v: 1 }),
      await runs.endedAgo(branch, 40 * dayMs),
      await runs.endedAgo(split, 30 * dayMs + 1),
    ];
    const kept = [await runs.endedAgo(split, 30 * dayMs), await runs.endedAgo(branch, 10 * dayMs)];
    await db.run(
      `INSERT INTO workflow_memory (id, scope, store, seq, task_id, project_id, payload, created_at)
        VALUES ('m1', 'global', 'global', 1, ?, 'p', '{}', 0)`,
      [gone[1]!],
    );
    for (const root of [...gone, ...kept]) await addRowsOfAnEarlierBuild(db, root);
    const before = new Map<string, Record<string, number>>();
    for (const root of [...gone, ...kept]) before.set(root, await rowsOf(db, root));
    // Each shape writes task rows, the branch and split runs tasks beside their root, and the tables of
    // earlier builds' stages and end records hold rows of each run too.
    for (const rows of before.values()) for (const table of runTables) expect(rows[table]).toBeGreaterThan(0);
    const goneTasks = (await tasksOf(db, gone[1]!)).concat(await tasksOf(db, gone[2]!));
    expect(goneTasks.filter((task) => task.includes('-clone-') || task.includes('-subtask-'))).toHaveLength(
      4,
    );

    const retention = createWorkflowRetention({ db, retainEndedDays: 30, clock: runs.clock });
    const goneRows = gone.reduce(
      (sum, root) => sum + Object.values(before.get(root)!).reduce((a, b) => a + b, 0),
      0,
    );
    expect(await retention.prune()).toEqual({ runs: 3, rows: goneRows });
    for (const root of gone) expect(await rowsOf(db, root)).toEqual(noRows);
    for (const root of kept) expect(await rowsOf(db, root)).toEqual(before.get(root));
    // Nothing of a pruned run is found by any of its task ids; the workflows' memory is not a run's.
    const records = createSqlRecordStore(db);
    for (const task of [...gone, ...goneTasks]) expect(await records.loadRun(task)).toBeUndefined();
    expect((await records.loadRun(kept[0]!))?.tasks).toHaveLength(3);
    const reader = await runs.engineOf(chain);
    expect(await reader.inspect(gone[0]!)).toBeUndefined();
    expect((await reader.inspect(kept[1]!))?.task.taskId).toBe(kept[1]);
    expect(await db.get('SELECT id FROM workflow_memory')).toEqual({ id: 'm1' });

    expect(await retention.prune()).toEqual({ runs: 0, rows: 0 });
  });

  it('keeps a live run, and a run with a live task or one that ended after the cutoff, however old', async () => {
    const db = getDb();
    runs = runsOn(db);
    let release: (value: unknown) => void = () => {};
    const gate = new Promise((resolve) => {
      release = resolve;
    });
    const waiting = await runs.engineOf(chain, { n1: () => gate });
    runs.clock.set(now - 40 * dayMs);
    const live = waiting.run({ v: 1 });
    const liveRoot = await new Promise<string>((resolve) => {
      const poll = async () => {
        const row = await db.get<{ task_id: string }>('SELECT task_id FROM workflow_tasks');
        if (row) resolve(row.task_id);
        else setImmediate(poll);
      };
      void poll();
    });
    const withLiveSubtask = await runs.endedAgo(split, 40 * dayMs);
    const [, subtask] = await tasksOf(db, withLiveSubtask);
    // Its end was never written (a crash): its parent may still be waiting for it.
    await db.run(
      "UPDATE workflow_tasks SET status = 'in_progress', lifecycle = 'active', completed_at = NULL WHERE task_id = ?",
      [subtask!],
    );
    const withYoungClone = await runs.endedAgo(branch, 40 * dayMs);
    const [, clone] = await tasksOf(db, withYoungClone);
    await db.run('UPDATE workflow_tasks SET completed_at = ? WHERE task_id = ?', [now - dayMs, clone!]);
    const roots = [liveRoot, withLiveSubtask, withYoungClone];
    const before: Array<Record<string, number>> = [];
    for (const root of roots) before.push(await rowsOf(db, root));

    const retention = createWorkflowRetention({ db, retainEndedDays: 30, clock: runs.clock });
    expect(await retention.prune()).toEqual({ runs: 0, rows: 0 });
    for (const [index, root] of roots.entries()) expect(await rowsOf(db, root)).toEqual(before[index]);

    // The live run goes on and ends whole, as if no prune had run.
    runs.clock.set(now);
    release({ v: 2 });
    const result = await live;
    expect(result.status).toBe('success');
    const report = await (await runs.engineOf(chain)).inspect(liveRoot);
    expect(report?.history.map((stage) => stage.nodeId)).toEqual(['start', 'n1', 'n2', 'exit']);
    expect(await retention.prune()).toEqual({ runs: 0, rows: 0 });
  });

  it('with retainEndedDays 0 keeps every run and reads nothing', async () => {
    runs = runsOn(getDb());
    const old = await runs.endedAgo(chain, 400 * dayMs, { v: 1 });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { db, statements } = counted(getDb());
    const retention = createWorkflowRetention({ db, retainEndedDays: 0, clock: runs.clock });
    retention.start();
    await vi.advanceTimersByTimeAsync(10 * 60 * 60 * 1000);
    expect(await retention.prune()).toEqual({ runs: 0, rows: 0 });
    expect(statements()).toBe(0);
    expect((await rowsOf(getDb(), old)).workflow_tasks).toBe(1);
    await retention.stop();
  });

  it('deletes batchRuns runs a transaction, never splits a millisecond, and a stop ends the prune after its batch', async () => {
    runs = runsOn(getDb());
    const roots: string[] = [];
    for (let index = 0; index < 5; index++)
      roots.push(await runs.endedAgo(chain, 40 * dayMs - index, { v: 1 }));
    // Three more ended in one millisecond, 35 days ago.
    for (let index = 0; index < 3; index++) roots.push(await runs.endedAgo(branch, 35 * dayMs));
    const transactions: number[] = [];
    const remaining = async () =>
      Number((await getDb().get<{ n: number }>('SELECT COUNT(*) AS n FROM workflow_tasks'))?.n);
    const counting: SqlDatabase = {
      ...getDb(),
      transaction: async (work, options) => {
        const left = await remaining();
        const result = await getDb().transaction(work, options);
        transactions.push(left - (await remaining()));
        return result;
      },
    };
    const whole = createWorkflowRetention({
      db: counting,
      retainEndedDays: 30,
      clock: runs.clock,
      batchRuns: 2,
    });
    const pruned = await whole.prune();
    expect(pruned.runs).toBe(8);
    // Tasks per transaction: two chains, two chains, then the last chain and the first branch run, whose
    // millisecond brings in the other two: four runs, their ids two to a statement, one transaction.
    expect(transactions).toEqual([2, 2, 1 + 3 * 3]);
    expect(await remaining()).toBe(0);

    for (let index = 0; index < 3; index++) await runs.endedAgo(chain, 40 * dayMs - index, { v: 1 });
    transactions.length = 0;
    const stopped = createWorkflowRetention({
      db: counting,
      retainEndedDays: 30,
      clock: runs.clock,
      batchRuns: 1,
    });
    const pruning = stopped.prune();
    await stopped.stop();
    expect((await pruning).runs).toBe(1);
    expect(transactions).toEqual([1]);
    expect(await remaining()).toBe(2);
  });

  it('prunes at start and then every intervalMs, until stopped', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const db = getDb();
    runs = runsOn(db);
    const logger = capturingLogger();
    const pruned = () => logger.lines.filter((line) => line.message === 'pruned ended workflow runs');
    const first = await runs.endedAgo(chain, 3 * dayMs, { v: 1 });
    const second = await runs.endedAgo(chain, dayMs, { v: 1 });
    const retention = createWorkflowRetention({
      db,
      retainEndedDays: 2,
      intervalMs: 60_000,
      clock: runs.clock,
      logger,
    });
    retention.start();
    retention.start();
    await eventually(() => expect(pruned()).toHaveLength(1));
    expect(pruned()[0]!.object).toMatchObject({ runs: 1, retainMs: 2 * dayMs });
    expect(await rowsOf(db, first)).toEqual(noRows);

    runs.clock.advance(2 * dayMs);
    await vi.advanceTimersByTimeAsync(60_000);
    await eventually(() => expect(pruned()).toHaveLength(2));
    expect(await rowsOf(db, second)).toEqual(noRows);

    const afterStop = await runs.endedAgo(chain, 10 * dayMs, { v: 1 });
    await retention.stop();
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    expect(pruned()).toHaveLength(2);
    expect((await rowsOf(db, afterStop)).workflow_tasks).toBe(1);
  });

  it('logs a prune the database refused, and prunes at the next interval', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    runs = runsOn(getDb());
    const old = await runs.endedAgo(branch, 40 * dayMs);
    const whole = await rowsOf(getDb(), old);
    const faulty = createFaultyDatabase(getDb());
    const logger = capturingLogger();
    const retention = createWorkflowRetention({
      db: faulty,
      retainEndedDays: 30,
      intervalMs: 60_000,
      clock: runs.clock,
      logger,
    });

    faulty.failWrites();
    retention.start();
    await eventually(() => expect(logger.lines.map((line) => line.level)).toEqual(['warn']));
    expect(logger.lines[0]!.object.err).toMatchObject({ code: ErrorCodes.storeUnavailable });
    expect(logger.lines[0]!.message).toBe(
      'could not prune ended workflow runs; trying again at the next prune',
    );
    expect(await rowsOf(getDb(), old)).toEqual(whole);

    faulty.heal();
    await vi.advanceTimersByTimeAsync(60_000);
    await eventually(() => expect(logger.lines.map((line) => line.level)).toEqual(['warn', 'info']));
    expect(logger.lines[1]!.object).toMatchObject({ runs: 1 });
    expect(await rowsOf(getDb(), old)).toEqual(noRows);
    await retention.stop();
  });

  it('a batch that fails midway leaves every run of it whole', async () => {
    runs = runsOn(getDb());
    const old = await runs.endedAgo(split, 40 * dayMs);
    const whole = await rowsOf(getDb(), old);
    // The stages and events are deleted, then the artifacts' statement fails: the transaction rolls back.
    const db = failingWithin(getDb(), /^DELETE FROM workflow_artifacts/);
    const retention = createWorkflowRetention({ db, retainEndedDays: 30, clock: runs.clock });
    await expect(retention.prune()).rejects.toThrow(/refused/);
    expect(await rowsOf(getDb(), old)).toEqual(whole);
    expect((await createSqlRecordStore(getDb()).loadRun(old))?.tasks).toHaveLength(3);
  });

  it('a run pruned while it is being read is read whole or not at all', async () => {
    runs = runsOn(getDb());
    const old = await runs.endedAgo(branch, 40 * dayMs);
    const retention = createWorkflowRetention({ db: getDb(), retainEndedDays: 30, clock: runs.clock });
    let pruned = false;
    // The prune commits right after the run's first rows were read.
    const racing: SqlDatabase = {
      ...getDb(),
      all: async (sql, params) => {
        const rows = await getDb().all(sql, params);
        if (!pruned) {
          pruned = true;
          expect((await retention.prune()).runs).toBe(1);
        }
        return rows as never;
      },
    };
    expect(await createSqlRecordStore(racing).loadRun(old)).toBeUndefined();
  });

  it('with nothing to delete reads one bounded range of an index; each batch deletes through indexes', async () => {
    runs = runsOn(getDb());
    for (let index = 0; index < 20; index++) await runs.endedAgo(chain, index * 1_000, { v: 1 });
    const { db, statements } = recording(getDb());
    const retention = createWorkflowRetention({ db, retainEndedDays: 1, clock: runs.clock });
    expect(await retention.prune()).toEqual({ runs: 0, rows: 0 });
    expect(statements).toHaveLength(1);
    const sqlite = getDb().dialect === 'sqlite';
    const page = await planOf(getDb(), statements[0]!);
    if (sqlite) {
      expect(page).toContain(
        'SEARCH workflow_tasks USING INDEX workflow_tasks_ended_runs (completed_at>? AND completed_at<?)',
      );
      expect(page).not.toMatch(/SCAN workflow_tasks|TEMP B-TREE/);
    } else {
      expect(page).toContain('Index Only Scan using workflow_tasks_ended_runs');
      expect(page).not.toMatch(/Seq Scan|Sort/);
    }

    await runs.endedAgo(branch, 2 * dayMs);
    statements.length = 0;
    expect((await retention.prune()).runs).toBe(1);
    const [, select, ...deletes] = statements;
    const selectPlan = await planOf(getDb(), select!);
    if (sqlite) {
      expect(selectPlan).toContain('SEARCH run USING INDEX workflow_tasks_ended_runs');
      expect(selectPlan).toContain('SEARCH task USING INDEX workflow_child_tasks_by_root (root_task_id=?)');
      expect(selectPlan).not.toMatch(/SCAN (run|task)/);
    } else {
      expect(selectPlan).toMatch(/(Index Scan using|Bitmap Index Scan on) workflow_tasks_ended_runs/);
      expect(selectPlan).toMatch(/Index Scan using workflow_child_tasks_by_root on workflow_tasks task/);
      expect(selectPlan).not.toMatch(/Seq Scan|hashed SubPlan|Join/);
    }
    // Table, index, and the key column it is searched by. A root task's row goes by its id, its clones and
    // subtasks by the index of a run's other tasks.
    const indexes: Array<[string, string, string]> = [
      ['workflow_stages', sqlite ? 'PRIMARY KEY' : 'workflow_stages_pkey', 'root_task_id'],
      ['workflow_events', sqlite ? 'PRIMARY KEY' : 'workflow_events_pkey', 'root_task_id'],
      ['workflow_artifacts', 'workflow_artifacts_by_root', 'root_task_id'],
      ['workflow_tasks', 'workflow_child_tasks_by_root', 'root_task_id'],
      ['workflow_tasks', sqlite ? 'sqlite_autoindex_workflow_tasks_1' : 'workflow_tasks_pkey', 'task_id'],
    ];
    expect(deletes.map((statement) => statement.sql.split(' ')[2])).toEqual(indexes.map(([table]) => table));
    for (const [index, statement] of deletes.entries()) {
      const [table, name, column] = indexes[index]!;
      const plan = await planOf(getDb(), statement);
      if (sqlite)
        expect(plan).toContain(
          `SEARCH ${table} USING ${name.includes('KEY') ? name : `INDEX ${name}`} (${column}=?)`,
        );
      else expect(plan).toMatch(new RegExp(`(Index Scan using|Bitmap Index Scan on) ${name}`));
    }
  });
});

describe('the retention option of the workflows section', () => {
  it('keeps 30 days, 0 for ever, fractions too, and refuses negative days', () => {
    expect(workflowsConfigSchema.parse({})).toEqual({ retainEndedDays: 30, runLeaseMs: 30_000 });
    expect(workflowsConfigSchema.parse({ retainEndedDays: 0.5, dirs: ['w'] })).toEqual({
      retainEndedDays: 0.5,
      runLeaseMs: 30_000,
      dirs: ['w'],
    });
    expect(workflowsConfigSchema.parse({ retainEndedDays: 0 }).retainEndedDays).toBe(0);
    expect(workflowsConfigSchema.safeParse({ retainEndedDays: -1 }).success).toBe(false);
  });

  it('counts as ended exactly the states that have a status', () => {
    expect(taskStates.filter((state) => outcomeOf(state) !== undefined).sort()).toEqual(
      [...endedTaskStates].sort(),
    );
  });
});
