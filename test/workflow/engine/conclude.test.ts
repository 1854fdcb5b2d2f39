import { describe, expect, it } from 'vitest';
import { childSettled, conclude, fanOutState, mergeInputOf } from '../../../src/workflow/engine/conclude.js';
import { addTask } from '../../../src/workflow/engine/core.js';
import { rootSpec } from '../../../src/workflow/engine/run-state.js';
import type { TelemetryEvent } from '../../../src/workflow/index.js';
import { chainWorkflow, workflowYaml } from '../helpers.js';
import { coreFor, runOf } from './core-helper.js';

const chain = () => {
  const { nodes, edges } = chainWorkflow(1);
  return { 'workflow.yaml': workflowYaml(nodes, edges) };
};

async function fanOut(role: 'branch' | 'split') {
  const core = await coreFor(chain());
  const run = runOf(core);
  const parent = run.root;
  parent.lifecycle = 'suspended';
  parent.fanOut = { nodeId: 'fan', role };
  const children = [0, 1].map((index) =>
    addTask(core, run, {
      taskId: `${parent.taskId}-clone-${index}`,
      rootTaskId: parent.taskId,
      spec: rootSpec('c', index),
      parentTaskId: parent.taskId,
      lineageType: 'clone',
      lifecycle: 'active',
      currentOutput: index,
    }),
  );
  parent.childTaskIds.push(...children.map((child) => child.taskId));
  return { core, run, parent, children };
}

describe('conclude', () => {
  it('ends a task once, with one completion event', async () => {
    const core = await coreFor(chain());
    const run = runOf(core);
    const events: TelemetryEvent[] = [];
    core.emitter.subscribe((event) => events.push(event));
    conclude(core, run, run.root, 'completed');
    conclude(core, run, run.root, 'failed', { code: 'X', message: 'late' });
    expect(run.root).toMatchObject({ lifecycle: 'concluded', state: 'completed', error: undefined });
    expect(events.map((event) => event.type)).toEqual(['task_completed']);
  });

  it('reports a failed task with its error', async () => {
    const core = await coreFor(chain());
    const run = runOf(core);
    conclude(core, run, run.root, 'failed', { code: 'BOOM', message: 'no' });
    expect(run.events.at(-1)).toMatchObject({
      type: 'task_failed',
      payload: { status: 'failure', error: { code: 'BOOM' } },
    });
  });

  it('describes a child for its MERGE with its lineage and last stage', async () => {
    const { children } = await fanOut('branch');
    const child = children[1]!;
    child.state = 'failed';
    child.error = { code: 'E', message: 'm', nodeId: 'n' };
    child.lineageMetadata = { clone_index: 1 };
    expect(mergeInputOf(child, 9)).toEqual({
      task_id: child.taskId,
      node_id: undefined,
      status: 'failure',
      output: 1,
      stage_result_index: -1,
      timestamp: 9,
      lineage_metadata: { type: 'clone', parent_task_id: 'wft_1', clone_index: 1 },
      error: { code: 'E', message: 'm' },
    });
  });

  it('ends a BRANCH parent by any success and a SPLIT parent only by all', async () => {
    const { parent } = await fanOut('branch');
    const mixed = [{ status: 'success' as const }, { status: 'failure' as const }];
    expect(fanOutState(parent, mixed)).toBe('completed');
    expect(fanOutState(parent, [{ status: 'partial' as const }, { status: 'failure' as const }])).toBe(
      'partial',
    );
    expect(fanOutState(parent, [{ status: 'failure' as const }])).toBe('failed');
    parent.fanOut = { nodeId: 'fan', role: 'split' };
    expect(fanOutState(parent, mixed)).toBe('partial');
    expect(fanOutState(parent, [{ status: 'success' as const }, { status: 'success' as const }])).toBe(
      'completed',
    );
  });

  it('waits for every child, then queues the parent at the MERGE they reached', async () => {
    const { core, run, parent, children } = await fanOut('branch');
    for (const child of children) child.arrivedAtMerge = 'join';
    conclude(core, run, children[0]!, 'completed');
    expect(parent.lifecycle).toBe('suspended');
    conclude(core, run, children[1]!, 'completed');
    expect(parent.lifecycle).toBe('active');
    expect(run.queue.slice(-2)).toEqual([parent, 'join']);
    expect(run.pendingMerges?.get(parent.taskId)?.map((input) => input.output)).toEqual([0, 1]);
  });

  it('fails the parent when its children reached different MERGE nodes', async () => {
    const { core, run, parent, children } = await fanOut('split');
    children[0]!.arrivedAtMerge = 'a';
    children[1]!.arrivedAtMerge = 'b';
    for (const child of children) conclude(core, run, child, 'completed');
    expect(parent).toMatchObject({ state: 'failed', error: { code: 'MERGE_CONFLICT' } });
  });

  it('concludes the parent with its children\u2019s outputs when none reached a MERGE', async () => {
    const { core, run, parent, children } = await fanOut('split');
    for (const child of children) conclude(core, run, child, 'failed', { code: 'E', message: 'x' });
    expect(parent).toMatchObject({ state: 'failed', error: { code: 'CHILDREN_FAILED' } });
    expect((parent.currentOutput as unknown[]).length).toBe(2);
  });

  it('ignores a settled child whose parent is not waiting', async () => {
    const { core, run, parent, children } = await fanOut('branch');
    parent.lifecycle = 'active';
    children[0]!.lifecycle = 'concluded';
    children[1]!.lifecycle = 'concluded';
    childSettled(core, run, children[1]!);
    expect(parent.lifecycle).toBe('active');
    expect(run.queue).toEqual([]);
  });
});
