import { afterEach, describe, expect, it } from 'vitest';
import { createStore, type Store } from '../../src/store/index.js';
import { createManualClock, createSequentialIdGenerator } from '../../src/util/index.js';
import { createRunOwner, type WorkflowEngine } from '../../src/workflow/index.js';
import { tempHome } from '../runtime/helpers.js';
import { chainWorkflow, engineFor, workflowYaml } from '../workflow/helpers.js';
import { runCli as run } from './helpers.js';

let release: (() => void) | undefined;
let engine: WorkflowEngine | undefined;
let store: Store | undefined;
afterEach(async () => {
  release?.();
  await engine?.close();
  await store?.close();
  release = engine = store = undefined;
});

describe('agentd inspect (in process) of a run whose process died', () => {
  it('shows it failed with INTERRUPTED, not in_progress for ever', async () => {
    const home = tempHome('agentd-inspect-interrupted-');
    store = await createStore({ stateDir: home });
    // A process that died ten minutes ago, in the middle of the run's first node: its lease long lapsed.
    const owner = createRunOwner({
      db: store.db,
      leaseMs: 1_000,
      clock: createManualClock(Date.now() - 10 * 60_000),
      idGenerator: createSequentialIdGenerator(),
    });
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started!: () => void;
    const inNode = new Promise<void>((resolve) => {
      started = resolve;
    });
    const { nodes, edges } = chainWorkflow(2);
    engine = await engineFor(
      { 'workflow.yaml': workflowYaml(nodes, edges, { id: 'chain' }) },
      {
        database: store.db,
        runOwner: owner,
        functions: {
          n1: async () => {
            started();
            await gate;
            return 'late';
          },
        },
      },
    );
    const { taskId } = engine.enqueue('input');
    await inNode;
    await expect
      .poll(
        async () => (await store!.db.all('SELECT 1 FROM workflow_tasks WHERE task_id = ?', [taskId])).length,
      )
      .toBe(1);
    await owner.close();

    const shown = await run(['--home', home, 'inspect', taskId, '--json']);
    expect(shown.code, `stderr: ${shown.err}`).toBe(0);
    const report = JSON.parse(shown.out);
    expect(report.task).toMatchObject({ state: 'failed', error: { code: 'INTERRUPTED' } });
    expect(report.summary.status).toBe('failure');
  }, 30_000);
});
