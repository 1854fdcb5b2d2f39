import { describe, expect, it } from 'vitest';
import { executeRun, finishRun, settleRun } from '../../../src/workflow/engine/execute-run.js';
import { chainWorkflow, workflowYaml } from '../helpers.js';
import { coreFor, runOf } from './core-helper.js';

describe('execute run', () => {
  it('runs a chain from START to EXIT and finishes with the result', async () => {
    const { nodes, edges } = chainWorkflow(2);
    const core = await coreFor(
      { 'workflow.yaml': workflowYaml(nodes, edges) },
      { functions: { n1: (value) => (value as number) + 1, n2: (value) => (value as number) * 10 } },
    );
    const run = runOf(core, 1);
    await executeRun(core, run);
    expect(run.root).toMatchObject({ lifecycle: 'concluded', state: 'completed', currentOutput: 20 });
    expect(run.root.history.map((stage) => stage.nodeId)).toEqual(['start', 'n1', 'n2', 'exit']);
    const result = finishRun(core, run);
    expect(result).toMatchObject({ status: 'success', output: 20, stagesExecuted: 4, taskId: 'wft_1' });
    settleRun(run, result);
    expect(await run.result).toBe(result);
    expect(core.artifacts.query({ rootTaskId: 'wft_1', type: 'telemetry_snapshot' })).toEqual([
      expect.objectContaining({
        artifactId: 'wft_1:telemetry',
        taskId: 'wft_1',
        // The events of the run (no scheduler here): task_started, two per stage, task_completed.
        payload: {
          eventCounts: { task_started: 1, node_started: 4, node_completed: 4, task_completed: 1 },
          events: 10,
        },
      }),
    ]);
    expect(core.metrics.snapshot().counters['task.completions{status=success}']).toBe(1);
  });

  it('ends every open task cancelled when the run is cancelled', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const core = await coreFor({ 'workflow.yaml': workflowYaml(nodes, edges) });
    const run = runOf(core);
    run.cancelled = true;
    await executeRun(core, run);
    expect(run.root).toMatchObject({ state: 'cancelled', error: { code: 'ABORTED' } });
    expect(run.root.history).toEqual([]);
  });

  it('fails every open task when a step crashes', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const core = await coreFor({ 'workflow.yaml': workflowYaml(nodes, edges) });
    const run = runOf(core);
    run.startNodeId = 'no-such-node';
    await executeRun(core, run);
    expect(run.root).toMatchObject({ state: 'failed', error: { code: 'INTERNAL' } });
  });

  it('fails the run, and still ends it, when reporting its start throws', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const core = await coreFor({ 'workflow.yaml': workflowYaml(nodes, edges) });
    const run = runOf(core);
    const emit = core.emitter.emit;
    core.emitter.emit = (target, type, ...rest) => {
      if (type === 'task_started') throw new Error('the log is gone');
      return emit(target, type, ...rest);
    };
    const ended = await executeRun(core, run, undefined, (target) => target.root.state);
    expect(ended).toBe('failed');
    expect(run.root).toMatchObject({
      state: 'failed',
      error: { code: 'INTERNAL', message: 'the log is gone' },
    });
  });
});
