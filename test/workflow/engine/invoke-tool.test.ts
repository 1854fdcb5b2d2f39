import { describe, expect, it } from 'vitest';
import { createPolicy } from '../../../src/tools/index.js';
import { invokeTool } from '../../../src/workflow/engine/invoke-tool.js';
import type { WorkflowFunctionContext } from '../../../src/workflow/index.js';
import type { PolicyManifest } from '../../../src/workflow/manifest-schemas.js';
import type { ToolCallRecord } from '../../../src/workflow/task.js';
import { chainWorkflow, workflowYaml } from '../helpers.js';
import { coreFor, runOf } from './core-helper.js';

async function setup(policy?: PolicyManifest) {
  const { nodes, edges } = chainWorkflow(1);
  nodes[1]!.tools = ['echo', 'strict', 'broken'];
  const loaded = await coreFor(
    {
      'workflow.yaml': workflowYaml(nodes, edges),
      'tools.yaml': {
        tools: [
          { id: 'echo', entrypoint: 'builtin:identity' },
          {
            id: 'strict',
            entrypoint: 'builtin:identity',
            input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
          },
          { id: 'broken', entrypoint: 'function:explode' },
          { id: 'unlisted', entrypoint: 'builtin:identity' },
        ],
      },
    },
    {
      functions: {
        explode: () => {
          throw new Error('disk on fire');
        },
      },
    },
  );
  // Policy is also checked when the workflow loads; a policy added later reaches only the call itself.
  const core = policy ? { ...loaded, policy: createPolicy(policy) } : loaded;
  const run = runOf(core);
  const calls: ToolCallRecord[] = [];
  const node = core.workflow.dag.nodes.get('n1')!;
  const call = (toolId: string, input: unknown) =>
    invokeTool(core, run, run.root, node, toolId, input, calls, () => ({}) as WorkflowFunctionContext);
  return { core, run, calls, call };
}

describe('invoke tool', () => {
  it('runs a listed tool, records the call and keeps its result as an artifact', async () => {
    const { core, run, calls, call } = await setup();
    expect(await call('echo', { a: 1 })).toEqual({ ok: true, value: { a: 1 } });
    expect(calls).toEqual([expect.objectContaining({ toolId: 'echo', status: 'success', misuse: false })]);
    expect(core.artifacts.query({ taskId: 'wft_1' })[0]).toMatchObject({
      type: 'tool_result',
      payload: { a: 1 },
      metadata: { toolId: 'echo' },
    });
    expect(run.events.map((event) => event.type)).toEqual(['tool_invoked', 'tool_completed']);
  });

  it('calls a tool the node does not list misuse, without running it', async () => {
    const { calls, call } = await setup();
    const outcome = await call('unlisted', {});
    expect(outcome).toMatchObject({ ok: false, misuse: true, error: { code: 'TOOL_MISUSE' } });
    expect(calls[0]).toMatchObject({ status: 'failure', misuse: true });
  });

  it('calls input that breaks the input_schema misuse', async () => {
    const { call } = await setup();
    expect(await call('strict', { other: 1 })).toMatchObject({
      misuse: true,
      error: { code: 'TOOL_MISUSE' },
    });
  });

  it('refuses a tool denied by policy and reports the denial', async () => {
    const { run, call } = await setup({
      policies: [
        { name: 'no-echo', enabled: true, rules: [{ target: 'tool', target_id: 'echo', action: 'deny' }] },
      ],
    });
    expect(await call('echo', {})).toMatchObject({ misuse: true, error: { code: 'POLICY_DENIED' } });
    expect(run.events.map((event) => event.type)).toEqual(['policy_denied', 'tool_failed']);
  });

  it('records a tool that throws as a failure that is not misuse', async () => {
    const { call } = await setup();
    expect(await call('broken', {})).toMatchObject({
      ok: false,
      misuse: false,
      error: { message: expect.stringContaining('disk on fire') },
    });
  });
});
