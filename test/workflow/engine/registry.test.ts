import { describe, expect, it } from 'vitest';
import { createArtifactStore } from '../../../src/workflow/artifacts.js';
import { createRunRegistry } from '../../../src/workflow/engine/registry.js';
import { createRunState, newTaskRecord, type Run, rootSpec } from '../../../src/workflow/engine/run-state.js';
import { FreshMap } from '../../../src/workflow/fresh-map.js';
import { chainWorkflow, engineFor, workflowYaml } from '../helpers.js';

const runNamed = (taskId: string) => {
  const run = createRunState(
    newTaskRecord('wf', 0, { taskId, rootTaskId: taskId, spec: rootSpec(taskId, 'x') }),
    'start',
  );
  const child = newTaskRecord('wf', 0, {
    taskId: `${taskId}-clone-0`,
    rootTaskId: taskId,
    spec: rootSpec(taskId, 'x'),
  });
  run.tasks.set(child.taskId, child);
  return run;
};

describe('run registry', () => {
  it('keeps the last retainRuns finished runs and forgets older ones with their artifacts', () => {
    const artifacts = createArtifactStore();
    const taskIndex = new FreshMap<string, Run>();
    const registry = createRunRegistry({ retainRuns: 2, taskIndex, artifacts });
    const runs = ['a', 'b', 'c'].map(runNamed);
    for (const run of runs) {
      registry.add(run);
      artifacts.add({
        artifactId: `${run.root.taskId}:0`,
        rootTaskId: run.root.taskId,
        taskId: run.root.taskId,
        nodeId: 'n',
        type: 'node_output',
        createdAt: 0,
        payload: null,
        metadata: {},
      });
    }
    expect(taskIndex.get('a-clone-0')).toBe(runs[0]);
    for (const run of runs) registry.retire(run);
    expect([...registry.runs.keys()]).toEqual(['b', 'c']);
    expect(taskIndex.has('a')).toBe(false);
    expect(taskIndex.has('a-clone-0')).toBe(false);
    expect(artifacts.query({ rootTaskId: 'a' })).toEqual([]);
    expect(artifacts.query({ rootTaskId: 'c' })).toHaveLength(1);
  });

  it('removes a run that never started', () => {
    const registry = createRunRegistry({
      retainRuns: 5,
      taskIndex: new FreshMap<string, Run>(),
      artifacts: createArtifactStore(),
    });
    const run = runNamed('x');
    registry.add(run);
    registry.remove(run);
    expect(registry.runs.size).toBe(0);
    expect(registry.taskIndex.size).toBe(0);
  });
});

describe('task ids of an engine', () => {
  it('refuses a run whose given id names a task of a retained run, a clone or the root, and not a new id', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const byGenerator = await engineFor({ 'workflow.yaml': workflowYaml(nodes, edges) });
    const first = await byGenerator.run('a');
    await expect(byGenerator.run('b', { taskId: first.taskId })).rejects.toMatchObject({ code: 'CONFLICT' });
    // A generator of the caller's may repeat itself: its ids are checked too.
    const repeating = await engineFor(
      { 'workflow.yaml': workflowYaml(nodes, edges) },
      { idGenerator: () => 'same' },
    );
    await repeating.run('a');
    await expect(repeating.run('b')).rejects.toMatchObject({ code: 'CONFLICT' });
    // The engine's own ids are new on every run.
    const own = await engineFor({ 'workflow.yaml': workflowYaml(nodes, edges) }, { idGenerator: undefined });
    const ids = new Set<string>();
    for (let index = 0; index < 50; index++) ids.add((await own.run(index)).taskId);
    expect(ids.size).toBe(50);
    await Promise.all([byGenerator.close(), repeating.close(), own.close()]);
  });
});
