import { describe, expect, it } from 'vitest';
import { decisionLabel, route, selectEdge, splitItemsOf } from '../../../src/workflow/engine/route.js';
import { edge, fanOutWorkflow, node, workflowYaml } from '../helpers.js';
import { coreFor, runOf } from './core-helper.js';

const decisionFiles = {
  'workflow.yaml': workflowYaml(
    [node('start', 'start'), node('pick', 'decision'), node('yes', 'exit'), node('no', 'exit')],
    [edge('start', 'pick'), edge('pick', 'yes', 'Approve'), edge('pick', 'no', 'reject')],
  ),
};

describe('route', () => {
  it('reads a decision label from a string or the usual keys of an object', () => {
    expect(decisionLabel('approve')).toBe('approve');
    expect(decisionLabel(7)).toBe('7');
    expect(decisionLabel({ route: 'a', next: 'b' })).toBe('a');
    expect(decisionLabel({ selected_edge: 'x' })).toBe('x');
    expect(decisionLabel({ other: 'x' })).toBeUndefined();
    expect(decisionLabel(null)).toBeUndefined();
  });

  it('selects an edge by exact label first, then ignoring case and spaces around', async () => {
    const core = await coreFor(decisionFiles);
    const pick = core.workflow.dag.nodes.get('pick')!;
    expect(selectEdge(pick, 'Approve')?.to).toBe('yes');
    expect(selectEdge(pick, '  approve ')?.to).toBe('yes');
    expect(selectEdge(pick, 'REJECT')?.to).toBe('no');
    expect(selectEdge(pick, 'maybe')).toBeUndefined();
    expect(selectEdge(pick, undefined)).toBeUndefined();
  });

  it('takes split items from a list or subtask_inputs', () => {
    expect(splitItemsOf([1, 2])).toEqual([1, 2]);
    expect(splitItemsOf({ subtask_inputs: ['a'] })).toEqual(['a']);
    expect(splitItemsOf({ items: [1] })).toBeUndefined();
    expect(splitItemsOf('x')).toBeUndefined();
  });

  it('follows a DECISION edge, tracing it and queueing the target', async () => {
    const core = await coreFor(decisionFiles);
    const run = runOf(core);
    const pick = core.workflow.dag.nodes.get('pick')!;
    route(core, run, run.root, pick, pick.outEdges[1], undefined);
    expect(run.root.routingTrace).toEqual([{ from: 'pick', to: 'no', role: 'decision', label: 'reject' }]);
    expect(run.queue).toEqual([run.root, 'no']);
    expect(run.events.map((event) => event.type)).toEqual(['routing_decision']);
  });

  it('clones the task per BRANCH edge with a copy of its output and suspends it', async () => {
    const core = await coreFor({
      'workflow.yaml': fanOutWorkflow({
        fan: node('fan', 'branch'),
        arms: [{ id: 'a', label: 'left' }, { id: 'b' }],
      }),
    });
    const run = runOf(core);
    run.root.currentOutput = { shared: [1] };
    route(core, run, run.root, core.workflow.dag.nodes.get('fan')!, undefined, undefined);
    expect(run.root.lifecycle).toBe('suspended');
    expect(run.root.childTaskIds).toEqual(['wft_1-clone-0', 'wft_1-clone-1']);
    const clone = run.tasks.get('wft_1-clone-0')!;
    expect(clone.currentOutput).toEqual({ shared: [1] });
    expect(clone.currentOutput).not.toBe(run.root.currentOutput);
    expect(clone.lineageMetadata).toEqual({ branch_label: 'left', cloned_at_stage: 'fan', clone_index: 0 });
    expect(core.taskIndex.get('wft_1-clone-1')).toBe(run);
    expect(run.queue.filter((entry) => typeof entry === 'string')).toEqual(['a', 'b']);
  });

  it('deals SPLIT items over the edges round robin, one subtask each', async () => {
    const core = await coreFor({
      'workflow.yaml': fanOutWorkflow({ fan: node('fan', 'split'), arms: [{ id: 'a' }, { id: 'b' }] }),
    });
    const run = runOf(core);
    route(core, run, run.root, core.workflow.dag.nodes.get('fan')!, undefined, ['x', { y: 1 }, 'z']);
    expect(run.queue.filter((entry) => typeof entry === 'string')).toEqual(['a', 'b', 'a']);
    const second = run.tasks.get('wft_1-subtask-1')!;
    expect(second.spec).toMatchObject({ input: { y: 1 }, request: '{"y":1}', taskSpecId: 'wft_1-subtask-1' });
    expect(run.events.at(-1)).toMatchObject({ type: 'routing_split' });
  });

  it('concludes a child that reaches a MERGE instead of queueing it', async () => {
    const core = await coreFor({
      'workflow.yaml': fanOutWorkflow({
        fan: node('fan', 'branch'),
        arms: [{ id: 'a' }, { id: 'b' }],
        join: node('join', 'merge'),
      }),
    });
    const run = runOf(core);
    route(core, run, run.root, core.workflow.dag.nodes.get('fan')!, undefined, undefined);
    const clone = run.tasks.get('wft_1-clone-0')!;
    run.queue.length = 0;
    route(core, run, clone, core.workflow.dag.nodes.get('a')!, undefined, undefined);
    expect(clone).toMatchObject({ lifecycle: 'concluded', state: 'completed', arrivedAtMerge: 'join' });
    expect(run.queue).toEqual([]);
  });

  it('concludes at an EXIT, failed with ALWAYS_FAIL when the exit says so', async () => {
    const core = await coreFor({
      'workflow.yaml': workflowYaml(
        [node('start', 'start'), node('bad', 'exit', { always_fail: true })],
        [edge('start', 'bad')],
      ),
    });
    const run = runOf(core);
    route(core, run, run.root, core.workflow.dag.nodes.get('bad')!, undefined, undefined);
    expect(run.root).toMatchObject({ state: 'failed', error: { code: 'ALWAYS_FAIL', nodeId: 'bad' } });
  });
});
