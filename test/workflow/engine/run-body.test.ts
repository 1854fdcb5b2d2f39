import { describe, expect, it } from 'vitest';
import { runBody } from '../../../src/workflow/engine/run-body.js';
import type { MergeInput } from '../../../src/workflow/engine/run-state.js';
import type { WorkflowFunctionContext } from '../../../src/workflow/index.js';
import type { ToolCallRecord } from '../../../src/workflow/task.js';
import { chainWorkflow, edge, node, workflowYaml } from '../helpers.js';
import { coreFor, runOf } from './core-helper.js';

describe('run body', () => {
  it('runs the function registered under the node id with a context of the task', async () => {
    const { nodes, edges } = chainWorkflow(1);
    let seen: WorkflowFunctionContext | undefined;
    const core = await coreFor(
      { 'workflow.yaml': workflowYaml(nodes, edges) },
      {
        functions: {
          n1: (input, context) => {
            seen = context;
            return `${input}!`;
          },
        },
      },
    );
    const run = runOf(core, 'hi');
    const output = runBody(core, run, run.root, core.workflow.dag.nodes.get('n1')!, 'hi', [], [], false);
    // A function that answers at once gives its output, not a promise of it.
    expect(output).toBe('hi!');
    expect(seen).toMatchObject({ taskId: 'wft_1', nodeId: 'n1', workflowId: core.workflow.id });
    expect(seen?.spec.request).toBe('hi');
    expect(seen?.signal.aborted).toBe(false);
  });

  it('chains the node\u2019s tools, recording a failing one as a failed call and going on', async () => {
    const { nodes, edges } = chainWorkflow(1);
    nodes[1]!.tools = ['double', 'broken', 'double'];
    const core = await coreFor(
      {
        'workflow.yaml': workflowYaml(nodes, edges),
        'tools.yaml': {
          tools: [
            { id: 'double', entrypoint: 'function:double' },
            { id: 'broken', entrypoint: 'function:broken' },
          ],
        },
      },
      {
        functions: {
          double: (input) => (input as number) * 2,
          broken: () => {
            throw new Error('flaky');
          },
        },
      },
    );
    const run = runOf(core, 3);
    const calls: ToolCallRecord[] = [];
    const output = await runBody(
      core,
      run,
      run.root,
      core.workflow.dag.nodes.get('n1')!,
      3,
      [],
      calls,
      false,
    );
    expect(output).toBe(12);
    expect(calls.map((call) => [call.toolId, call.status])).toEqual([
      ['double', 'success'],
      ['broken', 'failure'],
      ['double', 'success'],
    ]);
  });

  it('merges by default to the outputs of the children that did not fail, in child order', async () => {
    const core = await coreFor({
      'workflow.yaml': workflowYaml(
        [node('start', 'start'), node('join', 'merge'), node('exit', 'exit')],
        [edge('start', 'join'), edge('join', 'exit')],
      ),
    });
    const run = runOf(core);
    const input = (output: unknown, status: MergeInput['status']) => ({ output, status }) as MergeInput;
    const output = runBody(
      core,
      run,
      run.root,
      core.workflow.dag.nodes.get('join')!,
      { merge_inputs: [input('a', 'success'), input('b', 'failure'), input('c', 'partial')] },
      [],
      [],
      true,
    );
    expect(output).toEqual(['a', 'c']);
  });

  it('passes the input through a node with nothing to do', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const core = await coreFor({ 'workflow.yaml': workflowYaml(nodes, edges) });
    const run = runOf(core);
    const input = { same: 1 };
    expect(runBody(core, run, run.root, core.workflow.dag.nodes.get('n1')!, input, [], [], false)).toBe(
      input,
    );
  });
});
