import { describe, expect, it } from 'vitest';
import { checkMergeInputs, executeStage } from '../../../src/workflow/engine/execute-stage.js';
import type { MergeInput } from '../../../src/workflow/engine/run-state.js';
import { chainWorkflow, edge, node, workflowYaml } from '../helpers.js';
import { coreFor, runOf } from './core-helper.js';

const input = (status: MergeInput['status']): MergeInput => ({
  task_id: 't',
  node_id: 'n',
  status,
  output: status,
  stage_result_index: 0,
  timestamp: 0,
  lineage_metadata: {},
});

async function mergeNode(mode: string) {
  const core = await coreFor({
    'workflow.yaml': workflowYaml(
      [node('start', 'start'), node('join', 'merge', { merge_failure_mode: mode }), node('exit', 'exit')],
      [edge('start', 'join'), edge('join', 'exit')],
    ),
  });
  return core.workflow.dag.nodes.get('join')!;
}

describe('execute stage', () => {
  it('applies merge_failure_mode to the children\u2019s results', async () => {
    const partial = await mergeNode('partial');
    expect(checkMergeInputs(partial, [input('success'), input('success')])).toBe(false);
    expect(checkMergeInputs(partial, [input('success'), input('failure')])).toBe(true);
    expect(() => checkMergeInputs(partial, [input('failure')])).toThrow(/all 1 children failed/);
    const strict = await mergeNode('fail_on_any');
    expect(() => checkMergeInputs(strict, [input('success'), input('failure')])).toThrow(
      expect.objectContaining({ code: 'MERGE_CHILD_FAILED' }),
    );
  });

  it('runs a node, records its stage and queues the next one', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const core = await coreFor(
      { 'workflow.yaml': workflowYaml(nodes, edges) },
      { functions: { n1: (value) => ({ doubled: (value as number) * 2 }) } },
    );
    const run = runOf(core, 21);
    await executeStage(core, run, run.root, core.workflow.dag.nodes.get('n1')!);
    const [stage] = run.root.history;
    expect(stage).toMatchObject({ nodeId: 'n1', input: 21, output: { doubled: 42 }, nodeStatus: 'success' });
    expect(run.root.currentOutput).toEqual({ doubled: 42 });
    expect(run.queue).toEqual([run.root, 'exit']);
    expect(core.artifacts.query({ taskId: 'wft_1' }).map((artifact) => artifact.type)).toEqual([
      'node_output',
    ]);
    expect(core.metrics.snapshot().counters['node.executions{node=n1,status=success}']).toBe(1);
  });

  it('asks the policy about a node at its first stage, inside it: a policy that throws fails that stage', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const core = await coreFor({ 'workflow.yaml': workflowYaml(nodes, edges) });
    let asked = 0;
    const policy = core.policy;
    Object.assign(core, {
      policy: {
        ...policy,
        check: () => {
          asked++;
          throw new Error('policy store unreachable');
        },
      },
    });
    const run = runOf(core);
    await executeStage(core, run, run.root, core.workflow.dag.nodes.get('n1')!);
    expect(asked).toBe(1);
    expect(run.root.history[0]).toMatchObject({
      nodeId: 'n1',
      nodeStatus: 'failure',
      error: { message: 'policy store unreachable' },
    });
    expect(run.root.state).toBe('failed');
  });

  it('fails the task on an output that does not match its schema', async () => {
    const { nodes, edges } = chainWorkflow(1);
    nodes[1]!.outputs_schema_id = 'out';
    const core = await coreFor(
      {
        'workflow.yaml': workflowYaml(nodes, edges),
        'schemas/out.json': { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
      },
      { functions: { n1: () => ({ nope: true }) } },
    );
    const run = runOf(core);
    await executeStage(core, run, run.root, core.workflow.dag.nodes.get('n1')!);
    expect(run.root).toMatchObject({ state: 'failed', error: { code: 'OUTPUT_INVALID', nodeId: 'n1' } });
    expect(run.root.failureSignatures).toEqual(['n1:OUTPUT_INVALID']);
    expect(run.queue).toEqual([]);
  });

  it('goes on past a failure when the node continues on failure, leaving the task partial', async () => {
    const { nodes, edges } = chainWorkflow(1);
    nodes[1]!.continue_on_failure = true;
    const core = await coreFor(
      { 'workflow.yaml': workflowYaml(nodes, edges) },
      {
        functions: {
          n1: () => {
            throw new Error('flaky');
          },
        },
      },
    );
    const run = runOf(core, 'in');
    await executeStage(core, run, run.root, core.workflow.dag.nodes.get('n1')!);
    expect(run.root.history[0]).toMatchObject({ nodeStatus: 'failure', output: null });
    expect(run.root.toleratedFailure).toBe(true);
    expect(run.root.currentOutput).toBeUndefined();
    expect(run.queue).toEqual([run.root, 'exit']);
  });

  it('rejects a DECISION output that names no edge', async () => {
    const core = await coreFor(
      {
        'workflow.yaml': workflowYaml(
          [node('start', 'start'), node('pick', 'decision'), node('a', 'exit'), node('b', 'exit')],
          [edge('start', 'pick'), edge('pick', 'a', 'left'), edge('pick', 'b', 'right')],
        ),
      },
      { functions: { pick: () => 'up' } },
    );
    const run = runOf(core);
    await executeStage(core, run, run.root, core.workflow.dag.nodes.get('pick')!);
    expect(run.root.error).toMatchObject({ code: 'ROUTE_UNKNOWN_LABEL' });
    expect(run.root.error?.message).toContain('expected one of left, right');
  });

  it('reports a stage of a cancelled run as aborted', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const core = await coreFor(
      { 'workflow.yaml': workflowYaml(nodes, edges) },
      {
        functions: {
          n1: () => {
            throw new Error('interrupted');
          },
        },
      },
    );
    const run = runOf(core);
    run.cancelled = true;
    await executeStage(core, run, run.root, core.workflow.dag.nodes.get('n1')!);
    expect(run.root).toMatchObject({ state: 'cancelled', error: { code: 'ABORTED' } });
  });
});
