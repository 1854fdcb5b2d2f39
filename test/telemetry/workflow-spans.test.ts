import { describe, expect, it } from 'vitest';
import { chainWorkflow, trackedEngines, workflowYaml } from '../workflow/helpers.js';
import { namesOf, useTracing } from './otel-harness.js';

const tracing = useTracing();
const engines = trackedEngines();

describe('the span tree of a workflow run', () => {
  it('workflow run → one span per node → the node’s tool calls, with parent ids', async () => {
    const { nodes, edges } = chainWorkflow(2);
    nodes[1]!.tools = ['echo', 'shout'];
    const engine = await engines.make(
      {
        'workflow.yaml': workflowYaml(nodes, edges),
        'tools.yaml': {
          tools: [
            { id: 'echo', entrypoint: 'builtin:identity' },
            { id: 'shout', entrypoint: 'function:shout' },
          ],
        },
      },
      { functions: { shout: (input: unknown) => `${String(input)}!`, n2: (input: unknown) => input } },
    );
    const result = await engine.run('hello');
    expect(result.status).toBe('success');

    const run = tracing.span(`workflow_run ${engine.workflow.id}`);
    expect(run.attributes).toMatchObject({
      'agentd.workflow.id': engine.workflow.id,
      'agentd.workflow.task_id': result.taskId,
      'agentd.workflow.status': 'success',
    });
    expect(namesOf(tracing.tree(run))).toEqual({
      [`workflow_run ${engine.workflow.id}`]: [
        'workflow_node start',
        { 'workflow_node n1': ['execute_tool echo', 'execute_tool shout'] },
        'workflow_node n2',
        'workflow_node exit',
      ],
    });
    const n1 = tracing.span('workflow_node n1');
    expect(n1.parentSpanContext?.spanId).toBe(run.spanContext().spanId);
    expect(n1.attributes).toMatchObject({
      'agentd.workflow.node_id': 'n1',
      'agentd.workflow.node_role': 'linear',
      'agentd.workflow.status': 'success',
    });
    const shout = tracing.span('execute_tool shout');
    expect(shout.parentSpanContext?.spanId).toBe(n1.spanContext().spanId);
    expect(shout.spanContext().traceId).toBe(run.spanContext().traceId);
    expect(shout.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'shout',
    });
  });

  it('marks a failing node and its run with the error code', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const engine = await engines.make(
      { 'workflow.yaml': workflowYaml(nodes, edges) },
      {
        functions: {
          n1: () => {
            throw Object.assign(new Error('no'), { code: 'BROKEN_NODE' });
          },
        },
      },
    );
    const result = await engine.run('x');
    expect(result.status).toBe('failure');
    const node = tracing.span('workflow_node n1');
    expect(node.attributes['error.type']).toBe(result.error?.code);
    expect(node.status.code).toBe(2);
    const run = tracing.span(`workflow_run ${engine.workflow.id}`);
    expect(run.attributes['agentd.workflow.status']).toBe('failure');
    expect(run.attributes['error.type']).toBe(result.error?.code);
  });
});
