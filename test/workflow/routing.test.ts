import { describe, expect, it } from 'vitest';
import { createScriptedModel } from '../../src/testing.js';
import type { WorkflowFunction } from '../../src/workflow/index.js';
import { chainWorkflow, edge, fanOutWorkflow, node, trackedEngines, workflowYaml } from './helpers.js';

const { make } = trackedEngines();

const fail: WorkflowFunction = () => {
  throw new Error('boom');
};

describe('LINEAR chains and the status model', () => {
  it('runs a chain, threading each output into the next node', async () => {
    const { nodes, edges } = chainWorkflow(3);
    const engine = await make(
      { 'workflow.yaml': workflowYaml(nodes, edges) },
      {
        functions: {
          n1: (input) => `${input}-a`,
          n2: (input) => `${input}-b`,
          n3: async (input) => `${input}-c`,
        },
      },
    );
    const result = await engine.run('x');
    expect(result).toMatchObject({
      status: 'success',
      state: 'completed',
      output: 'x-a-b-c',
      stagesExecuted: 5,
    });
    const report = await engine.inspect(result.taskId);
    expect(report!.summary.path).toEqual(['start', 'n1', 'n2', 'n3', 'exit']);
    expect(report!.routingTrace.map((step) => `${step.from}>${step.to}`)).toEqual([
      'start>n1',
      'n1>n2',
      'n2>n3',
      'n3>exit',
    ]);
    expect(engine.status(result.taskId)).toMatchObject({
      lifecycle: 'concluded',
      state: 'completed',
      status: 'success',
    });
  });

  it('a failed node halts the task as failure; the EXIT never runs', async () => {
    const { nodes, edges } = chainWorkflow(2);
    const engine = await make({ 'workflow.yaml': workflowYaml(nodes, edges) }, { functions: { n1: fail } });
    const result = await engine.run('x');
    expect(result).toMatchObject({
      status: 'failure',
      state: 'failed',
      error: { code: 'NODE_ERROR', message: 'boom', nodeId: 'n1' },
    });
    const report = await engine.inspect(result.taskId);
    expect(report!.summary.path).toEqual(['start', 'n1']);
    expect(report!.history[1]!.nodeStatus).toBe('failure');
  });

  it('continue_on_failure lets the task go on with the previous output and end partial', async () => {
    const { nodes, edges } = chainWorkflow(2);
    nodes[1] = { ...nodes[1]!, continue_on_failure: true };
    const engine = await make(
      { 'workflow.yaml': workflowYaml(nodes, edges) },
      { functions: { n1: fail, n2: (input) => `${input}!` } },
    );
    const result = await engine.run('x');
    expect(result).toMatchObject({ status: 'partial', state: 'partial', output: 'x!' });
    expect((await engine.inspect(result.taskId))!.summary.path).toEqual(['start', 'n1', 'n2', 'exit']);
  });

  it('EXIT is read-only and always_fail forces failure', async () => {
    const { nodes, edges } = chainWorkflow(1);
    nodes[2] = { ...nodes[2]!, always_fail: true };
    const engine = await make(
      { 'workflow.yaml': workflowYaml(nodes, edges) },
      { functions: { n1: () => 'made', exit: () => 'changed by exit' } },
    );
    const result = await engine.run('x');
    expect(result).toMatchObject({ status: 'failure', output: 'made', error: { code: 'ALWAYS_FAIL' } });
  });

  it('validates node output against outputs_schema_id', async () => {
    const { nodes, edges } = chainWorkflow(1);
    nodes[1] = { ...nodes[1]!, outputs_schema_id: 'doc' };
    const engine = await make(
      {
        'workflow.yaml': workflowYaml(nodes, edges),
        'schemas/doc.json': {
          type: 'object',
          properties: { title: { type: 'string' } },
          required: ['title'],
        },
      },
      { functions: { n1: () => ({ title: 7 }) } },
    );
    const result = await engine.run('x');
    expect(result.error).toMatchObject({ code: 'OUTPUT_INVALID', nodeId: 'n1' });
    expect(result.error!.message).toMatch(/title/);
  });
});

describe('DECISION', () => {
  const decisionFiles = () => ({
    'workflow.yaml': fanOutWorkflow({
      fan: node('choose', 'decision'),
      arms: [
        { id: 'left', label: 'left' },
        { id: 'right', label: 'right', exit: 'other' },
      ],
    }),
  });

  it('follows the edge named by selected_edge, or by a plain string output', async () => {
    const engine = await make(decisionFiles(), {
      functions: {
        choose: (input) => (input === 'go right' ? { selected_edge: 'right' } : 'left'),
        left: () => 'L',
        right: () => 'R',
      },
    });
    expect((await engine.run('go right')).output).toBe('R');
    expect((await engine.run('anything')).output).toBe('L');
  });

  it('an unknown label fails the stage', async () => {
    const engine = await make(decisionFiles(), { functions: { choose: () => ({ route: 'up' }) } });
    const result = await engine.run('x');
    expect(result).toMatchObject({
      status: 'failure',
      error: { code: 'ROUTE_UNKNOWN_LABEL', nodeId: 'choose' },
    });
    expect(result.error!.message).toMatch(/"up"; expected one of left, right/);
  });

  it('an agent DECISION asks the model with the labels and routes on its reply', async () => {
    const files = decisionFiles();
    const workflow = files['workflow.yaml'] as { nodes: Array<Record<string, unknown>> };
    workflow.nodes[1] = { ...workflow.nodes[1], kind: 'agent', agent_id: 'router' };
    const model = createScriptedModel({ steps: [{ text: '{"selected_edge":"right"}' }] });
    const engine = await make(
      { ...files, 'agents.yaml': { agents: [{ id: 'router', llm: 'scripted/x' }] } },
      { resolveModel: () => model, functions: { right: (input) => input } },
    );
    const result = await engine.run({ request: 'please go right' });
    expect(result.status).toBe('success');
    // The decision's verdict is recorded; the payload flows on unchanged.
    expect(result.output).toEqual({ request: 'please go right' });
    expect((await engine.inspect(result.taskId))!.history[1]!.output).toEqual({ selected_edge: 'right' });
    expect(model.requests[0]!.metadata).toMatchObject({
      purpose: 'route',
      labels: ['left', 'right'],
      input: 'please go right',
    });
    model.assertAllConsumed();
  });
});

describe('BRANCH, SPLIT and MERGE', () => {
  it('BRANCH clones the task per edge; the parent succeeds when any clone succeeds', async () => {
    const engine = await make(
      {
        'workflow.yaml': fanOutWorkflow({
          fan: node('fan', 'branch'),
          arms: [
            { id: 'a', label: 'alpha', exit: 'end_a' },
            { id: 'b', label: 'beta', exit: 'end_b' },
          ],
        }),
      },
      { functions: { a: (input) => `${input}+a`, b: fail } },
    );
    const result = await engine.run('seed');
    expect(result.status).toBe('success');
    expect(result.childTaskIds).toEqual([`${result.taskId}-clone-0`, `${result.taskId}-clone-1`]);
    const clone0 = await engine.inspect(`${result.taskId}-clone-0`);
    expect(clone0!.task).toMatchObject({
      parentTaskId: result.taskId,
      lineageType: 'clone',
      state: 'completed',
    });
    expect(clone0!.task.lineageMetadata).toEqual({
      branch_label: 'alpha',
      cloned_at_stage: 'fan',
      clone_index: 0,
    });
    expect(clone0!.output).toBe('seed+a');
    expect(engine.status(`${result.taskId}-clone-1`)).toMatchObject({ state: 'failed', status: 'failure' });
    expect(result.output).toEqual([
      expect.objectContaining({ task_id: `${result.taskId}-clone-0`, status: 'success', output: 'seed+a' }),
      expect.objectContaining({
        task_id: `${result.taskId}-clone-1`,
        status: 'failure',
        error: { code: 'NODE_ERROR', message: 'boom' },
      }),
    ]);
  });

  it('BRANCH fails when every clone fails', async () => {
    const engine = await make(
      {
        'workflow.yaml': fanOutWorkflow({ fan: node('fan', 'branch'), arms: [{ id: 'a' }, { id: 'b' }] }),
      },
      { functions: { a: fail, b: fail } },
    );
    expect(await engine.run('x')).toMatchObject({ status: 'failure', error: { code: 'CHILDREN_FAILED' } });
  });

  const splitFiles = (mode: string) => ({
    'workflow.yaml': fanOutWorkflow({
      fan: node('split', 'split'),
      arms: [
        { id: 'even', label: 'e' },
        { id: 'odd', label: 'o' },
      ],
      join: node('join', 'merge', { merge_failure_mode: mode }),
    }),
  });
  const splitFunctions = (failing: (item: string) => boolean): Record<string, WorkflowFunction> => ({
    split: (input) => ({ subtask_inputs: String(input).split(',') }),
    even: (item) => {
      if (failing(String(item))) throw new Error(`bad ${item}`);
      return `even:${item}`;
    },
    odd: (item) => {
      if (failing(String(item))) throw new Error(`bad ${item}`);
      return `odd:${item}`;
    },
  });

  it('SPLIT sends input i down edge i mod n; MERGE receives every child and folds into the parent', async () => {
    let received: unknown;
    const engine = await make(splitFiles('fail_on_any'), {
      functions: {
        ...splitFunctions(() => false),
        join: (input) => {
          received = input;
          return (input as { merge_inputs: Array<{ output: string }> }).merge_inputs
            .map((entry) => entry.output)
            .join('|');
        },
      },
    });
    const result = await engine.run('p,q,r');
    expect(result).toMatchObject({ status: 'success', output: 'even:p|odd:q|even:r' });
    const mergeInputs = (received as { merge_inputs: Array<Record<string, unknown>> }).merge_inputs;
    expect(mergeInputs).toHaveLength(3);
    expect(mergeInputs[1]).toMatchObject({
      task_id: `${result.taskId}-subtask-1`,
      node_id: 'odd',
      status: 'success',
      stage_result_index: 0,
      lineage_metadata: {
        type: 'subtask',
        parent_task_id: result.taskId,
        split_edge_label: 'o',
        split_at_stage: 'split',
        subtask_index: 1,
        subtask_input: 'q',
      },
    });
    const report = await engine.inspect(result.taskId);
    expect(report!.summary.path).toEqual(['start', 'split', 'join', 'done']);
    expect(report!.lineage.map((task) => task.taskId)).toEqual([
      result.taskId,
      ...[0, 1, 2].map((index) => `${result.taskId}-subtask-${index}`),
    ]);
  });

  it('fail_on_any: a failed child reaches the merge and fails the parent', async () => {
    let mergeRan = false;
    const engine = await make(splitFiles('fail_on_any'), {
      functions: {
        ...splitFunctions((item) => item === 'q'),
        join: () => {
          mergeRan = true;
          return 'merged';
        },
      },
    });
    const result = await engine.run('p,q,r');
    expect(result).toMatchObject({
      status: 'failure',
      error: { code: 'MERGE_CHILD_FAILED', nodeId: 'join' },
    });
    expect(result.error!.message).toMatch(/1 of 3 children failed/);
    expect(mergeRan).toBe(false);
  });

  it('ignore_failures: the merge sees the failure but the parent succeeds with the successes', async () => {
    const engine = await make(splitFiles('ignore_failures'), {
      functions: splitFunctions((item) => item === 'q'),
    });
    const result = await engine.run('p,q,r');
    expect(result).toMatchObject({ status: 'success', output: ['even:p', 'even:r'] });
    const join = (await engine.inspect(result.taskId))!.history.find((stage) => stage.nodeId === 'join')!;
    expect(
      (join.input as { merge_inputs: Array<{ status: string }> }).merge_inputs.map((entry) => entry.status),
    ).toEqual(['success', 'failure', 'success']);
  });

  it('partial: mixed results make the parent partial; all failed makes it fail', async () => {
    const mixed = await make(splitFiles('partial'), { functions: splitFunctions((item) => item === 'q') });
    expect(await mixed.run('p,q,r')).toMatchObject({ status: 'partial', output: ['even:p', 'even:r'] });
    const allFailed = await make(splitFiles('partial'), { functions: splitFunctions(() => true) });
    // No child reached the merge, so it does not run; the parent fails on its children.
    expect(await allFailed.run('p,q')).toMatchObject({
      status: 'failure',
      error: { code: 'CHILDREN_FAILED' },
    });
  });

  it('SPLIT output must be a non-empty list', async () => {
    const engine = await make(splitFiles('fail_on_any'), { functions: { split: () => [] } });
    expect(await engine.run('x')).toMatchObject({
      status: 'failure',
      error: { code: 'SPLIT_INVALID_OUTPUT', nodeId: 'split' },
    });
  });

  it('BRANCH clones join at a MERGE and the parent continues down its edge', async () => {
    const engine = await make(
      {
        'workflow.yaml': fanOutWorkflow({
          fan: node('fan', 'branch'),
          arms: [{ id: 'a' }, { id: 'b' }],
          join: node('join', 'merge'),
          after: ['after'],
        }),
      },
      {
        functions: {
          a: (input) => `${input}A`,
          b: (input) => `${input}B`,
          after: (input) => (input as string[]).join('+'),
        },
      },
    );
    const result = await engine.run('x');
    expect(result).toMatchObject({ status: 'success', output: 'xA+xB' });
  });

  it('a MERGE reached without children (after a DECISION) passes the output through', async () => {
    let joinCalled = false;
    const engine = await make(
      {
        'workflow.yaml': fanOutWorkflow({
          fan: node('choose', 'decision'),
          arms: [
            { id: 'a', label: 'a' },
            { id: 'b', label: 'b' },
          ],
          join: node('join', 'merge'),
        }),
      },
      {
        functions: {
          choose: () => 'b',
          b: () => ({ doc: 'B' }),
          join: () => {
            joinCalled = true;
            return 'never';
          },
        },
      },
    );
    const result = await engine.run('x');
    expect(result).toMatchObject({ status: 'success', output: { doc: 'B' } });
    expect(joinCalled).toBe(false);
  });
});

describe('tools on deterministic nodes', () => {
  const files = (tools: unknown[]) => ({
    'workflow.yaml': workflowYaml(
      [node('start', 'start'), node('work', 'linear', { tools: ['shape', 'flaky'] }), node('done', 'exit')],
      [edge('start', 'work'), edge('work', 'done')],
    ),
    'tools.yaml': { tools },
    'tools.mjs':
      'export const shape = (input) => ({ text: String(input.text).toUpperCase() });\nexport const flaky = () => { throw new Error("disk full"); };\n',
  });
  const toolList = [
    {
      id: 'shape',
      entrypoint: './tools.mjs#shape',
      input_schema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    },
    { id: 'flaky', entrypoint: './tools.mjs#flaky' },
  ];

  it('a tool error that is not misuse is recorded, the node is partial, the task ends partial', async () => {
    const engine = await make(files(toolList));
    const result = await engine.run({ text: 'hi' });
    expect(result).toMatchObject({ status: 'partial', output: { text: 'HI' } });
    const stage = (await engine.inspect(result.taskId))!.history[1]!;
    expect(stage.nodeStatus).toBe('partial');
    expect(stage.toolCalls.map((call) => [call.toolId, call.status, call.misuse])).toEqual([
      ['shape', 'success', false],
      ['flaky', 'failure', false],
    ]);
  });

  it('misuse (input not matching input_schema) fails the node', async () => {
    const engine = await make(files(toolList));
    const result = await engine.run({ wrong: true });
    expect(result).toMatchObject({ status: 'failure', error: { code: 'TOOL_MISUSE', nodeId: 'work' } });
  });
});

describe('cancellation and replay', () => {
  it('cancel() ends a running task as cancelled (failure)', async () => {
    const { nodes, edges } = chainWorkflow(2);
    let release!: () => void;
    const started = new Promise<void>((resolve) => {
      release = resolve;
    });
    const engine = await make(
      { 'workflow.yaml': workflowYaml(nodes, edges) },
      {
        functions: {
          n1: (_input, context) =>
            new Promise((_resolve, reject) => {
              release();
              context.signal.addEventListener('abort', () => reject(new Error('aborted')));
            }),
        },
      },
    );
    const queued = engine.enqueue('x');
    await started;
    expect(engine.cancel(queued.taskId)).toBe(true);
    const result = await queued.result;
    expect(result).toMatchObject({ status: 'failure', state: 'cancelled' });
    expect(engine.cancel(queued.taskId)).toBe(false);
  });

  it('cancel() right after enqueue() stops a run of functions that answer at once after its START stage', async () => {
    const { nodes, edges } = chainWorkflow(3);
    const ran: string[] = [];
    const step = (id: string) => (input: unknown) => {
      ran.push(id);
      return input;
    };
    const engine = await make(
      { 'workflow.yaml': workflowYaml(nodes, edges) },
      { functions: { n1: step('n1'), n2: step('n2'), n3: step('n3') } },
    );
    const queued = engine.enqueue('x');
    expect(engine.cancel(queued.taskId)).toBe(true);
    expect(await queued.result).toMatchObject({ status: 'failure', state: 'cancelled', stagesExecuted: 1 });
    expect(ran).toEqual([]);
    // Not cancelled, the same run goes through every stage.
    expect(await engine.run('x')).toMatchObject({ status: 'success', stagesExecuted: 5 });
    expect(ran).toEqual(['n1', 'n2', 'n3']);
  });

  it('replay: the same inputs, manifests and model outputs produce identical runs', async () => {
    const files = {
      'workflow.yaml': workflowYaml(
        [
          node('start', 'start'),
          node('route', 'decision', { kind: 'agent', agent_id: 'router' }),
          node('split', 'split'),
          node('work', 'linear'),
          node('join', 'merge', { merge_failure_mode: 'partial' }),
          node('skip', 'linear'),
          node('done', 'exit'),
        ],
        [
          edge('start', 'route'),
          edge('route', 'split', 'many'),
          edge('route', 'skip', 'one'),
          edge('split', 'work'),
          edge('work', 'join'),
          edge('skip', 'join'),
          edge('join', 'done'),
        ],
        { id: 'replay' },
      ),
      'agents.yaml': { agents: [{ id: 'router', llm: 'scripted/r' }] },
    };
    const functions: Record<string, WorkflowFunction> = {
      split: () => ['a', 'b', 'c'],
      work: (item) => {
        if (item === 'b') throw new Error('b fails');
        return `${item}!`;
      },
    };
    const runOnce = async () => {
      const model = createScriptedModel({ steps: [{ text: '{"selected_edge":"many"}' }] });
      const engine = await make(files, { resolveModel: () => model, functions });
      const result = await engine.run({ request: 'split it' });
      const report = await engine.inspect(result.taskId);
      return { result, report };
    };
    const first = await runOnce();
    const second = await runOnce();
    expect(first.result.status).toBe('partial');
    expect(JSON.stringify(second.report)).toBe(JSON.stringify(first.report));
    expect(JSON.stringify(second.result)).toBe(JSON.stringify(first.result));
  });
});
