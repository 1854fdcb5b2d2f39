import { describe, expect, it, vi } from 'vitest';
import { createStore } from '../../src/store/index.js';
import { createManualClock } from '../../src/util/index.js';
import { createSqlRecordStore } from '../../src/workflow/record-store.js';
import { testMethodContext } from '../gateway/helpers.js';
import { dayMs, homeWithConfig, runtimeIn, useRuntimeHomes } from '../helpers/retention.js';
import { chainWorkflow, engineFor, workflowYaml, writeWorkflow } from '../workflow/helpers.js';

const chain = { 'workflow.yaml': workflowYaml(chainWorkflow(2).nodes, chainWorkflow(2).edges) };

/** A home whose agentd.yaml is `yaml` and whose store holds a run that ended 40 days ago and one of yesterday. */
async function homeWithRuns(yaml: string) {
  const home = homeWithConfig('agentd-workflow-retention-', yaml);
  const store = await createStore({ stateDir: home });
  const clock = createManualClock(Date.now() - 40 * dayMs);
  const engine = await engineFor(chain, { database: store.db, clock });
  const old = (await engine.run({ v: 1 })).taskId;
  clock.set(Date.now() - dayMs);
  const recent = (await engine.run({ v: 2 })).taskId;
  await engine.close();
  await store.close();
  return { home, old, recent };
}

describe("the runtime's retention of ended workflow runs", () => {
  const { homes, openIn } = useRuntimeHomes();

  it('deletes at start the runs that ended more than 30 days ago, and workflow.inspect answers NOT_FOUND for them', async () => {
    const { home, old, recent } = await homeWithRuns('');
    homes.push(home);
    const runtime = await openIn(home);
    const records = createSqlRecordStore(runtime.store.db);
    expect(await records.loadRun(old)).toBeDefined();

    await runtime.startBackground();
    await vi.waitFor(async () => expect(await records.loadRun(old)).toBeUndefined(), { timeout: 10_000 });
    expect((await records.loadRun(recent))?.tasks[0]?.state).toBe('completed');

    // The gateway reads runs through the engines it loaded: one for a run of its own.
    const dir = writeWorkflow(chain);
    await runtime.runWorkflow({ dir, input: { v: 3 } });
    const inspect = (taskId: string) =>
      runtime.methods.invoke('workflow.inspect', { taskId }, testMethodContext(['operator.read']));
    await expect(inspect(old)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(inspect(recent)).resolves.toMatchObject({ report: { task: { taskId: recent } } });
  });

  it('follows workflows.retainEndedDays of agentd.yaml', async () => {
    const left = async (yaml: string) => {
      const { home, old, recent } = await homeWithRuns(yaml);
      homes.push(home);
      const runtime = await runtimeIn(home);
      await runtime.startBackground();
      // Closing waits for a prune that started, so what is there after close is what retention left.
      await runtime.close();
      const store = await createStore({ stateDir: home });
      try {
        const records = createSqlRecordStore(store.db);
        let kept = 0;
        for (const taskId of [old, recent]) if (await records.loadRun(taskId)) kept++;
        return kept;
      } finally {
        await store.close();
      }
    };
    expect(await left('workflows:\n  retainEndedDays: 0.5\n')).toBe(0);
    expect(await left('workflows:\n  retainEndedDays: 0\n')).toBe(2);
  });
});
