import { describe, expect, it } from 'vitest';
import type { WorkflowEngine } from '../../../src/workflow/index.js';
import { chainWorkflow, trackedEngines, workflowYaml } from '../helpers.js';

// Stage events of a run nobody listens to are noted and built when read; a run with listeners builds them
// at once. Both must leave the same record, including a run whose first listener arrives mid-run.
describe('deferred stage events', () => {
  const engines = trackedEngines();
  const { nodes, edges } = chainWorkflow(12);
  const files = { 'workflow.yaml': workflowYaml(nodes, edges) };
  /** What a run left, with the workflow's id (named after each engine's temporary folder) left out. */
  const record = async (engine: WorkflowEngine, taskId: string) => {
    const report = await engine.inspect(taskId);
    const text = JSON.stringify({ report, artifacts: engine.artifacts({ rootTaskId: taskId }) });
    return JSON.parse(text.replace(/agentd-wf-[A-Za-z0-9]+/g, 'workflow')) as {
      report: { events: Array<{ type: string }> };
      artifacts: unknown[];
    };
  };

  it('records the same events and artifacts with no listener, a listener from the start, and one from mid-run', async () => {
    const quiet = await engines.make(files);
    const quietRun = await quiet.run({ text: 'hello' });

    const listened = await engines.make(files);
    const seenFromStart: string[] = [];
    listened.subscribe((event) => seenFromStart.push(event.type));
    const listenedRun = await listened.run({ text: 'hello' });

    // Its listener subscribes while node n6 runs (a function that hands its input on, as the others do).
    const seenLate: string[] = [];
    const late: WorkflowEngine = await engines.make(files, {
      functions: {
        n6: (input) => {
          late.subscribe((event) => seenLate.push(event.type));
          return input;
        },
      },
    });
    const { taskId, result } = late.enqueue({ text: 'hello' });
    const lateRun = await result;

    expect(quietRun.taskId).toBe(listenedRun.taskId);
    expect(taskId).toBe(quietRun.taskId);
    const expected = await record(quiet, quietRun.taskId);
    expect(expected.report.events.length).toBe(seenFromStart.length);
    expect(expected.report.events.filter((event) => event.type === 'node_completed').length).toBeGreaterThan(
      12,
    );
    expect(expected.artifacts.length).toBeGreaterThan(12);
    expect(await record(listened, listenedRun.taskId)).toEqual(expected);
    expect(await record(late, lateRun.taskId)).toEqual(expected);
    // The late listener joined while the run was going: some events were deferred, the rest built at once.
    expect(seenLate.length).toBeGreaterThan(0);
    expect(seenLate.length).toBeLessThan(seenFromStart.length);
  });
});
