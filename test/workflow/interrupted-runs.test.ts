import { afterEach, expect, it } from 'vitest';
import { workflowsConfigSchema } from '../../src/runtime/workflow-methods.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { createManualClock, createSequentialIdGenerator } from '../../src/util/index.js';
import {
  concludeInterruptedRuns,
  createInterruptedRunSweep,
  createRunOwner,
  createWorkflowRetention,
  type RunOwner,
  type WorkflowEngine,
} from '../../src/workflow/index.js';
import { inspectPersistedRun } from '../../src/workflow/inspector.js';
import { createSqlRecordStore } from '../../src/workflow/record-store.js';
import { interruptedMessage } from '../../src/workflow/run-owners.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { capturingLogger, planOf, recording } from '../helpers/retention.js';
import { chainWorkflow, edge, engineFor, node, workflowYaml } from './helpers.js';

/**
 * A durable run's code lives in the process that started it. When that process dies mid-run its task rows
 * stay open: before owners (migration 0042) they read `in_progress` for ever, in `inspect` and the run lists,
 * and the retention never took them. Here a "crash" is an engine whose process stops renewing its lease
 * without ending its run (its owner closed with the run still held), the time moved past the lease.
 */

const leaseMs = 1_000;
const chain = () => {
  const { nodes, edges } = chainWorkflow(2);
  return { 'workflow.yaml': workflowYaml(nodes, edges, { id: 'chain' }) };
};
// A split into subtasks: the open run has tasks besides its root, which must end with it.
const split = {
  'workflow.yaml': workflowYaml(
    [node('start', 'start'), node('split', 'split'), node('work', 'linear'), node('done', 'exit')],
    [edge('start', 'split'), edge('split', 'work'), edge('work', 'done')],
    { id: 'split' },
  ),
};

interface Hang {
  started: Promise<void>;
  release(): void;
}

function hang(): Hang & { node: () => Promise<unknown> } {
  let release!: () => void;
  let started!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const startedPromise = new Promise<void>((resolve) => {
    started = resolve;
  });
  return {
    started: startedPromise,
    release,
    node: async () => {
      started();
      await gate;
      return 'late';
    },
  };
}

const openEngines: WorkflowEngine[] = [];
const hangs: Hang[] = [];
afterEach(async () => {
  for (const held of hangs.splice(0)) held.release();
  await Promise.all(openEngines.splice(0).map((engine) => engine.close()));
});

/** Rows of the run's tasks: state, end and owner as stored. */
async function tasksOf(db: SqlDatabase, root: string) {
  return db.all<{ task_id: string; status: string; lifecycle: string; completed_at: number | null }>(
    'SELECT task_id, status, lifecycle, completed_at FROM workflow_tasks WHERE root_task_id = ? ORDER BY task_id',
    [root],
  );
}

async function waitForRows(db: SqlDatabase, root: string, atLeast: number) {
  const deadline = Date.now() + 5_000;
  while ((await tasksOf(db, root)).length < atLeast) {
    if (Date.now() > deadline) throw new Error(`the run ${root} did not write ${atLeast} task rows`);
    await new Promise((resume) => setTimeout(resume, 5));
  }
}

describeEachDatabase('interrupted workflow runs', (getDb) => {
  /** A run left open by a process that then "died": its owner stopped renewing, the run never ended. */
  async function crashedRun(files: Record<string, unknown>, input: unknown, owner: RunOwner) {
    const held = hang();
    hangs.push(held);
    const engine = await engineFor(files, {
      database: getDb(),
      runOwner: owner,
      functions: { n1: held.node, work: held.node },
    });
    openEngines.push(engine);
    const { taskId } = engine.enqueue(input);
    await held.started;
    return { taskId, engine };
  }

  /**
   * A run whose process died at `at` by its clock: its `tasks` rows written, then its owner gone, the owner's
   * row left as last renewed (`at` + the lease).
   */
  async function deadOwnersRun(files: Record<string, unknown>, input: unknown, at: number, tasks = 1) {
    const owner = createRunOwner({
      db: getDb(),
      leaseMs,
      clock: createManualClock(at),
      idGenerator: createSequentialIdGenerator(),
    });
    const { taskId } = await crashedRun(files, input, owner);
    await waitForRows(getDb(), taskId, tasks);
    await owner.close();
    return taskId;
  }

  it('concludes the open tasks of a dead owner failed INTERRUPTED, shown so by inspect and the run list', async () => {
    const db = getDb();
    const taskId = await deadOwnersRun(split, ['a', 'b'], 1_000_000, 3);

    // Before the lease lapsed: still its owner's, left alone.
    expect(await concludeInterruptedRuns(db, { now: 1_000_000 + leaseMs - 1 })).toEqual({
      tasks: 0,
      runs: 0,
    });
    expect((await tasksOf(db, taskId)).every((task) => task.completed_at === null)).toBe(true);

    const at = 1_000_000 + leaseMs + 1;
    expect(await concludeInterruptedRuns(db, { now: at })).toEqual({ tasks: 3, runs: 1 });
    const tasks = await tasksOf(db, taskId);
    expect(tasks.map((task) => [task.status, task.lifecycle, Number(task.completed_at)])).toEqual(
      tasks.map(() => ['failed', 'concluded', at]),
    );
    const report = await inspectPersistedRun(createSqlRecordStore(db), taskId);
    expect(report?.summary.status).toBe('failure');
    expect(report?.task).toMatchObject({
      state: 'failed',
      lifecycle: 'concluded',
      status: 'failure',
      error: { code: 'INTERRUPTED', message: interruptedMessage },
    });
    expect(report?.lineage.map((task) => [task.state, task.error?.code])).toEqual(
      tasks.map(() => ['failed', 'INTERRUPTED']),
    );
    const runs = await createSqlRecordStore(db).listRuns({ workflowId: 'split' });
    expect(runs).toEqual([expect.objectContaining({ taskId, status: 'failed' })]);
    // The dead owner's row went with its runs; a second sweep finds nothing.
    expect(await db.all('SELECT owner_id FROM workflow_run_owners')).toEqual([]);
    expect(await concludeInterruptedRuns(db, { now: at + 1 })).toEqual({ tasks: 0, runs: 0 });
  });

  it('never concludes the runs of a live owner, nor its own whose lease lapsed while blocked', async () => {
    const db = getDb();
    const clock = createManualClock(5_000_000);
    const owner = createRunOwner({ db, leaseMs, clock });
    const { taskId } = await crashedRun(chain(), 'x', owner);
    await waitForRows(db, taskId, 1);
    const [row] = await db.all<{ owner_id: string; alive_until: number }>(
      'SELECT owner_id, alive_until FROM workflow_run_owners',
    );
    // The first task row renewed the lease in its own transaction.
    expect(row).toEqual({ owner_id: owner.id, alive_until: expect.anything() });
    expect(Number(row!.alive_until)).toBe(5_000_000 + leaseMs);
    const ownerOfTask = await db.get<{ owner_id: string }>(
      'SELECT owner_id FROM workflow_tasks WHERE task_id = ?',
      [taskId],
    );
    expect(ownerOfTask?.owner_id).toBe(owner.id);

    expect(await concludeInterruptedRuns(db, { now: 5_000_000 + leaseMs })).toEqual({ tasks: 0, runs: 0 });
    // The lease lapsed, but the sweeping process is the owner: its run is alive, however late.
    expect(
      await concludeInterruptedRuns(db, { now: 5_000_000 + 10 * leaseMs, ownOwnerId: owner.id }),
    ).toEqual({ tasks: 0, runs: 0 });
    expect((await tasksOf(db, taskId))[0]).toMatchObject({ status: 'in_progress', completed_at: null });
    await owner.close();
  });

  it('renews the lease while a run waits on a slow node, and gives it up when closed with none', async () => {
    const db = getDb();
    const clock = createManualClock(9_000_000);
    const owner = createRunOwner({ db, leaseMs: 90, clock });
    const { taskId, engine } = await crashedRun(chain(), 'x', owner);
    await waitForRows(db, taskId, 1);
    clock.set(9_000_500);
    // Every third of the lease: no write of the run is needed for the lease to follow the clock.
    const deadline = Date.now() + 5_000;
    for (;;) {
      const row = await db.get<{ alive_until: number }>('SELECT alive_until FROM workflow_run_owners');
      if (Number(row?.alive_until) === 9_000_590) break;
      if (Date.now() > deadline) throw new Error(`the lease was not renewed: ${JSON.stringify(row)}`);
      await new Promise((resume) => setTimeout(resume, 10));
    }
    expect(await concludeInterruptedRuns(db, { now: 9_000_589 })).toEqual({ tasks: 0, runs: 0 });
    for (const held of hangs.splice(0)) held.release();
    await expect(engine.run('y')).resolves.toMatchObject({ status: 'success' });
    await engine.close();
    openEngines.splice(0);
    await owner.close();
    expect(await db.all('SELECT owner_id FROM workflow_run_owners')).toEqual([]);
  });

  it('concludes open tasks written before owners existed, and an engine of its own sweeps when created', async () => {
    const db = getDb();
    const held = hang();
    hangs.push(held);
    // A store with no owner writes the rows an older version left: task rows with no owner_id.
    const legacy = await engineFor(chain(), { database: db, functions: { n1: held.node } });
    openEngines.push(legacy);
    const { taskId } = legacy.enqueue('x');
    await held.started;
    await waitForRows(db, taskId, 1);
    await db.run('UPDATE workflow_tasks SET owner_id = NULL WHERE root_task_id = ?', [taskId]);

    // What `agentd run` does after a crash: its engine, given no owner, sweeps before it writes.
    const fresh = await engineFor(chain(), { database: db, functions: { n1: () => 'now' } });
    openEngines.push(fresh);
    expect(await tasksOf(db, taskId)).toEqual([
      expect.objectContaining({ task_id: taskId, status: 'failed', lifecycle: 'concluded' }),
    ]);
    const report = await fresh.inspect(taskId);
    expect(report?.task).toMatchObject({ status: 'failure', error: { code: 'INTERRUPTED' } });
  });

  it('lets the retention take an interrupted run once it ended long enough ago', async () => {
    const db = getDb();
    const taskId = await deadOwnersRun(chain(), 'x', 2_000_000);
    const dayMs = 24 * 60 * 60 * 1000;
    const retention = createWorkflowRetention({
      db,
      retainEndedDays: 1,
      clock: createManualClock(5 * dayMs),
    });
    // Open, so never pruned however old.
    expect(await retention.prune()).toEqual({ runs: 0, rows: 0 });
    await concludeInterruptedRuns(db, { now: 2 * dayMs });
    expect((await retention.prune()).runs).toBe(1);
    expect(await tasksOf(db, taskId)).toEqual([]);
  });

  it('reads only the open tasks through their partial index', async () => {
    const { db, statements } = recording(getDb());
    await concludeInterruptedRuns(db, { now: 1, ownOwnerId: 'wro_me' });
    const select = statements.find((statement) => statement.sql.startsWith('SELECT task_id'));
    expect(select).toBeDefined();
    expect(await planOf(getDb(), select!)).toMatch(/workflow_tasks_open/);
  });

  it('takes a lease of 100 ms to an hour from agentd.yaml, 30 s by default', () => {
    expect(workflowsConfigSchema.parse({}).runLeaseMs).toBe(30_000);
    expect(workflowsConfigSchema.parse({ runLeaseMs: 100 }).runLeaseMs).toBe(100);
    for (const runLeaseMs of [99, 3_600_001, 1.5, '30000'])
      expect(workflowsConfigSchema.safeParse({ runLeaseMs }).success).toBe(false);
  });

  it('sweeps at start and every interval, and logs what it concluded', async () => {
    const db = getDb();
    const taskId = await deadOwnersRun(chain(), 'x', 3_000_000);
    const live = createRunOwner({ db, leaseMs });
    const logger = capturingLogger();
    const sweep = createInterruptedRunSweep({ db, owner: live, intervalMs: 20, logger });
    sweep.start();
    try {
      const deadline = Date.now() + 5_000;
      while ((await tasksOf(db, taskId))[0]?.status !== 'failed') {
        if (Date.now() > deadline) throw new Error('the sweep did not conclude the run');
        await new Promise((resume) => setTimeout(resume, 10));
      }
      expect(logger.lines).toContainEqual(
        expect.objectContaining({
          level: 'info',
          message: 'concluded workflow runs interrupted by a stopped process',
          object: { tasks: 1, runs: 1 },
        }),
      );
    } finally {
      await sweep.stop();
      await live.close();
    }
  });
});
