import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createWorkflowEngine, loadWorkflow, type WorkflowIssue } from '../../src/workflow/index.js';
import { WorkflowValidationError } from '../../src/workflow/validate.js';
import { edge, type NodeSpec, node, workflowYaml, writeWorkflow } from './helpers.js';

const valid = () => ({
  nodes: [node('start', 'start'), node('work', 'linear'), node('done', 'exit')],
  edges: [edge('start', 'work'), edge('work', 'done')],
});

async function issuesOf(files: Record<string, unknown>): Promise<WorkflowIssue[]> {
  try {
    await loadWorkflow(writeWorkflow(files));
  } catch (error) {
    expect(error).toBeInstanceOf(WorkflowValidationError);
    expect((error as WorkflowValidationError).code).toBe('INVALID_CONFIG');
    return (error as WorkflowValidationError).issues;
  }
  return [];
}

async function expectRule(
  files: Record<string, unknown>,
  rule: string,
  file: string,
  path: string | RegExp,
  message: RegExp,
) {
  const issues = await issuesOf(files);
  const matching = issues.filter((issue) => issue.rule === rule);
  expect(matching, JSON.stringify(issues, null, 2)).not.toHaveLength(0);
  const hit = matching.find(
    (issue) =>
      issue.file === file && (typeof path === 'string' ? issue.path === path : path.test(issue.path)),
  );
  expect(hit, JSON.stringify(matching, null, 2)).toBeDefined();
  expect(hit!.message).toMatch(message);
}

function withNodes(
  nodes: NodeSpec[],
  edges: Array<Record<string, string>>,
  more: Record<string, unknown> = {},
) {
  return { 'workflow.yaml': workflowYaml(nodes, edges), ...more };
}

describe('loadWorkflow validation (one test per rule)', () => {
  it('loads a valid workflow and hashes each manifest', async () => {
    const { nodes, edges } = valid();
    const workflow = await loadWorkflow(writeWorkflow(withNodes(nodes, edges)));
    expect(workflow.dag.defaultStartId).toBe('start');
    expect(workflow.metadata.manifestHashes['workflow.yaml']).toMatch(/^[0-9a-f]{64}$/);
    expect(workflow.metadata.engineVersion).toBeTruthy();
  });

  it('manifest-read: a missing workflow.yaml and broken YAML are reported with file and line', async () => {
    await expectRule(
      { 'agents.yaml': { agents: [] } },
      'manifest-read',
      'workflow.yaml',
      '(root)',
      /expected this file/,
    );
    await expectRule(
      { 'workflow.yaml': 'version: 1\nnodes: [\n  - id: a\n' },
      'manifest-read',
      'workflow.yaml',
      /^line \d+/,
      /expected valid YAML/,
    );
  });

  it('manifest-schema: a bad field names file, path and the expectation', async () => {
    const { nodes, edges } = valid();
    nodes[1] = { ...nodes[1]!, role: 'loop' };
    await expectRule(
      withNodes(nodes, edges),
      'manifest-schema',
      'workflow.yaml',
      'nodes[1].role',
      /expected one of "start"/,
    );
    const typo = valid();
    typo.nodes[1] = { ...typo.nodes[1]!, continue_on_falure: true };
    await expectRule(
      withNodes(typo.nodes, typo.edges),
      'manifest-schema',
      'workflow.yaml',
      'nodes[1]',
      /unexpected field\(s\) "continue_on_falure"/,
    );
    const missing = valid();
    delete (missing.nodes[1] as Record<string, unknown>).context;
    await expectRule(
      withNodes(missing.nodes, missing.edges),
      'manifest-schema',
      'workflow.yaml',
      'nodes[1].context',
      /required/,
    );
  });

  it('manifest-schema: an evaluation case without input says the field is required and how to give none', async () => {
    const { nodes, edges } = valid();
    const issues = await issuesOf(
      withNodes(nodes, edges, {
        'evaluations.yaml': {
          suites: [
            {
              name: 'smoke',
              cases: [{ id: 'no_input', assertions: [{ type: 'status', expected: 'success' }] }],
            },
          ],
        },
      }),
    );
    const hit = issues.find((issue) => issue.file === 'evaluations.yaml');
    expect(hit, JSON.stringify(issues, null, 2)).toMatchObject({
      rule: 'manifest-schema',
      path: 'suites[0].cases[0].input',
    });
    expect(hit!.message).toMatch(/required/);
    expect(hit!.message).toMatch(/null/);
    expect(hit!.message).not.toMatch(/nonoptional/);
  });

  it('unique-node-ids', async () => {
    const { nodes, edges } = valid();
    nodes.push(node('work', 'linear'));
    await expectRule(
      withNodes(nodes, edges),
      'unique-node-ids',
      'workflow.yaml',
      'nodes[3].id',
      /unique node id/,
    );
  });

  it('edge-endpoints', async () => {
    const { nodes, edges } = valid();
    edges.push(edge('work', 'ghost'));
    await expectRule(
      withNodes(nodes, edges),
      'edge-endpoints',
      'workflow.yaml',
      'edges[2].to',
      /"ghost" is not one/,
    );
  });

  it('acyclic', async () => {
    const nodes = [node('start', 'start'), node('a', 'merge'), node('b', 'linear'), node('done', 'exit')];
    const edges = [edge('start', 'a'), edge('a', 'b'), edge('b', 'a'), edge('b', 'done')];
    await expectRule(withNodes(nodes, edges), 'acyclic', 'workflow.yaml', 'edges', /cycle a → b → a/);
  });

  it('one-default-start: none, or two flagged', async () => {
    await expectRule(
      withNodes([node('work', 'linear'), node('done', 'exit')], [edge('work', 'done')]),
      'one-default-start',
      'workflow.yaml',
      'nodes',
      /role start/,
    );
    const nodes = [
      node('s1', 'start', { default_start: true }),
      node('s2', 'start', { default_start: true }),
      node('m', 'merge'),
      node('done', 'exit'),
    ];
    const edges = [edge('s1', 'm'), edge('s2', 'm'), edge('m', 'done')];
    await expectRule(
      withNodes(nodes, edges),
      'one-default-start',
      'workflow.yaml',
      'nodes',
      /exactly one START/,
    );
  });

  it('has-exit', async () => {
    await expectRule(
      withNodes([node('start', 'start'), node('work', 'linear')], [edge('start', 'work')]),
      'has-exit',
      'workflow.yaml',
      'nodes',
      /at least one node with role exit/,
    );
  });

  it('reachable: every node is reachable from a START', async () => {
    const nodes = [
      node('start', 'start'),
      node('work', 'linear'),
      node('orphan', 'linear'),
      node('done', 'exit'),
    ];
    const edges = [edge('start', 'work'), edge('work', 'done'), edge('orphan', 'done')];
    await expectRule(
      withNodes(nodes, edges),
      'reachable',
      'workflow.yaml',
      'nodes[2]',
      /"orphan" to be reachable/,
    );
  });

  it('reaches-exit: every node has a path to an EXIT', async () => {
    const nodes = [
      node('start', 'start'),
      node('d', 'decision'),
      node('dead', 'linear'),
      node('sink', 'linear'),
      node('done', 'exit'),
    ];
    const edges = [
      edge('start', 'd'),
      edge('d', 'done', 'ok'),
      edge('d', 'dead', 'no'),
      edge('dead', 'sink'),
    ];
    await expectRule(
      withNodes(nodes, edges),
      'reaches-exit',
      'workflow.yaml',
      'nodes[2]',
      /"dead" to have a path to an EXIT/,
    );
  });

  it('start-exit-deterministic', async () => {
    const { nodes, edges } = valid();
    nodes[2] = { ...nodes[2]!, kind: 'agent', agent_id: 'writer' };
    await expectRule(
      withNodes(nodes, edges, { 'agents.yaml': { agents: [{ id: 'writer', llm: 'local/x' }] } }),
      'start-exit-deterministic',
      'workflow.yaml',
      'nodes[2].kind',
      /expected kind deterministic for the EXIT/,
    );
  });

  it('edge-counts per role', async () => {
    const nodes = [node('start', 'start'), node('work', 'linear'), node('a', 'exit'), node('b', 'exit')];
    const edges = [edge('start', 'work'), edge('work', 'a'), edge('work', 'b')];
    await expectRule(
      withNodes(nodes, edges),
      'edge-counts',
      'workflow.yaml',
      'nodes[1]',
      /exactly 1 outbound edge\(s\) for a LINEAR node "work"; found 2/,
    );
    const decision = [node('start', 'start'), node('d', 'decision'), node('done', 'exit')];
    await expectRule(
      withNodes(decision, [edge('start', 'd'), edge('d', 'done', 'x')]),
      'edge-counts',
      'workflow.yaml',
      'nodes[1]',
      /at least 2 outbound/,
    );
  });

  it('exit-read-only: no tools on an EXIT, always_fail only on EXIT', async () => {
    const { nodes, edges } = valid();
    nodes[2] = { ...nodes[2]!, tools: ['echo'] };
    nodes[1] = { ...nodes[1]!, always_fail: true };
    const files = withNodes(nodes, edges, {
      'tools.yaml': { tools: [{ id: 'echo', entrypoint: 'builtin:identity' }] },
    });
    await expectRule(files, 'exit-read-only', 'workflow.yaml', 'nodes[2].tools', /no tools on the EXIT/);
    await expectRule(files, 'exit-read-only', 'workflow.yaml', 'nodes[1].always_fail', /only on an EXIT/);
  });

  it('decision-labels: every DECISION edge has a unique label', async () => {
    const nodes = [node('start', 'start'), node('d', 'decision'), node('a', 'exit'), node('b', 'exit')];
    await expectRule(
      withNodes(nodes, [edge('start', 'd'), edge('d', 'a', 'x'), edge('d', 'b')]),
      'decision-labels',
      'workflow.yaml',
      'edges[2]',
      /expected a label/,
    );
    await expectRule(
      withNodes(nodes, [edge('start', 'd'), edge('d', 'a', 'x'), edge('d', 'b', 'x')]),
      'decision-labels',
      'workflow.yaml',
      'edges[2].label',
      /"x" repeats/,
    );
  });

  it('agent-exists: agent nodes name an agent from agents.yaml', async () => {
    const { nodes, edges } = valid();
    nodes[1] = { ...nodes[1]!, kind: 'agent', agent_id: 'nobody' };
    await expectRule(
      withNodes(nodes, edges),
      'agent-exists',
      'workflow.yaml',
      'nodes[1].agent_id',
      /"nobody" is not one/,
    );
  });

  it('tools-exist', async () => {
    const { nodes, edges } = valid();
    nodes[1] = { ...nodes[1]!, tools: ['missing_tool'] };
    await expectRule(
      withNodes(nodes, edges),
      'tools-exist',
      'workflow.yaml',
      'nodes[1].tools[0]',
      /"missing_tool" is not one/,
    );
  });

  it('tools-allowed: a tool denied by policy is invalid on a node', async () => {
    const { nodes, edges } = valid();
    nodes[1] = { ...nodes[1]!, tools: ['writer'] };
    await expectRule(
      withNodes(nodes, edges, {
        'tools.yaml': { tools: [{ id: 'writer', entrypoint: 'builtin:write_file' }] },
        'policy.yaml': {
          policies: [
            {
              name: 'read-only',
              rules: [{ target: 'tool', target_id: 'writer', action: 'deny', reason: 'no writes' }],
            },
          ],
        },
      }),
      'tools-allowed',
      'workflow.yaml',
      'nodes[1].tools[0]',
      /denied by policy "read-only" \(no writes\)/,
    );
  });

  it('context-resolves', async () => {
    const { nodes, edges } = valid();
    nodes[1] = { ...nodes[1]!, context: 'nowhere' };
    await expectRule(
      withNodes(nodes, edges),
      'context-resolves',
      'workflow.yaml',
      'nodes[1].context',
      /"nowhere" is not one/,
    );
  });

  it('schemas-resolve', async () => {
    const { nodes, edges } = valid();
    nodes[1] = { ...nodes[1]!, outputs_schema_id: 'summary' };
    await expectRule(
      withNodes(nodes, edges),
      'schemas-resolve',
      'workflow.yaml',
      'nodes[1].outputs_schema_id',
      /schemas\/summary\.json/,
    );
  });

  it('credentials-resolve', async () => {
    const { nodes, edges } = valid();
    await expectRule(
      withNodes(nodes, edges, {
        'agents.yaml': { agents: [{ id: 'w', llm: 'openai/gpt-4o-mini', credential_id: 'nope' }] },
      }),
      'credentials-resolve',
      'agents.yaml',
      'agents[0].credential_id',
      /"nope" is not one/,
    );
  });

  it('unique-ids in agents.yaml', async () => {
    const { nodes, edges } = valid();
    await expectRule(
      withNodes(nodes, edges, {
        'agents.yaml': {
          agents: [
            { id: 'w', llm: 'local/x' },
            { id: 'w', llm: 'local/y' },
          ],
        },
      }),
      'unique-ids',
      'agents.yaml',
      'agents[1].id',
      /"w" repeats/,
    );
  });

  it('tools-load: unknown builtins and missing module exports', async () => {
    const { nodes, edges } = valid();
    await expectRule(
      withNodes(nodes, edges, { 'tools.yaml': { tools: [{ id: 't', entrypoint: 'builtin:teleport' }] } }),
      'tools-load',
      'tools.yaml',
      'tools[0].entrypoint',
      /builtin tools/,
    );
    await expectRule(
      withNodes(nodes, edges, {
        'tools.yaml': { tools: [{ id: 't', entrypoint: './tools.mjs#nothing' }] },
        'tools.mjs': 'export const something = () => 1;\n',
      }),
      'tools-load',
      'tools.yaml',
      'tools[0].entrypoint',
      /export "nothing"/,
    );
  });

  it('agent-tools-need-engage: agent nodes with tools need runAgentWithTools', async () => {
    const { nodes, edges } = valid();
    nodes[1] = { ...nodes[1]!, kind: 'agent', agent_id: 'w', tools: ['echo'] };
    const workflow = await loadWorkflow(
      writeWorkflow(
        withNodes(nodes, edges, {
          'agents.yaml': { agents: [{ id: 'w', llm: 'local/x' }] },
          'tools.yaml': { tools: [{ id: 'echo', entrypoint: 'builtin:identity' }] },
        }),
      ),
    );
    const attempt = createWorkflowEngine({ workflow });
    await expect(attempt).rejects.toBeInstanceOf(WorkflowValidationError);
    await expect(attempt).rejects.toThrow(/runAgentWithTools/);
    const engine = await createWorkflowEngine({ workflow, runAgentWithTools: async () => ({ text: 'ok' }) });
    await engine.close();
  });
});

describe('generated JSON Schemas', () => {
  it('schemas/*.schema.json match the zod manifest schemas (run scripts/generate-schemas.ts after changing them)', async () => {
    const { readFileSync } = await import('node:fs');
    const { resolve } = await import('node:path');
    const { manifestFiles } = await import('../../src/workflow/manifest-schemas.js');
    for (const spec of Object.values(manifestFiles)) {
      const file = resolve(
        import.meta.dirname,
        '../../schemas',
        spec.file.replace(/\.yaml$/, '.schema.json'),
      );
      const onDisk = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
      const fresh = z.toJSONSchema(spec.schema as z.ZodType, {
        io: 'input',
        unrepresentable: 'any',
      }) as Record<string, unknown>;
      expect(onDisk.properties, spec.file).toEqual(fresh.properties);
    }
  });
});
