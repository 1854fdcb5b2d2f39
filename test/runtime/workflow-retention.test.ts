import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createRuntime, loadConfig, type Runtime } from '../../src/index.js';
import { createStore } from '../../src/store/index.js';
import { createScriptedModel } from '../../src/testing.js';
import { createManualClock } from '../../src/util/index.js';
import { createSqlRecordStore } from '../../src/workflow/record-store.js';
import { testMethodContext } from '../gateway/helpers.js';
import { chainWorkflow, engineFor, workflowYaml, writeWorkflow } from '../workflow/helpers.js';
import { captureLog, tempHome } from './helpers.js';

const dayMs = 24 * 60 * 60 * 1000;
const chain = { 'workflow.yaml': workflowYaml(chainWorkflow(2).nodes, chainWorkflow(2).edges) };

/** A home whose agentd.yaml is `yaml` and whose store holds a run that ended 40 days ago and one of yesterday. */
async function homeWithRuns(yaml: string) {
  const home = tempHome('agentd-workflow-retention-');
  writeFileSync(join(home, 'agentd.yaml'), yaml);
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

async function runtimeIn(home: string): Promise<Runtime> {
  const env = { AGENTD_HOME: home };
  return createRuntime({
    config: loadConfig({ cwd: home, env }),
    env,
    model: createScriptedModel({ steps: [] }),
    logDestination: captureLog().stream,
  });
}

describe("the runtime's retention of ended workflow runs", () => {
  const homes: string[] = [];
  const open: Runtime[] = [];
  afterEach(async () => {
    for (const runtime of open.splice(0)) await runtime.close();
    for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true });
  });

  it('deletes at start the runs that ended more than 30 days ago, and workflow.inspect answers NOT_FOUND for them', async () => {
    const { home, old, recent } = await homeWithRuns('');
    homes.push(home);
    const runtime = await runtimeIn(home);
    open.push(runtime);
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
