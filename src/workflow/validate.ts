import { createPolicy } from '../tools/index.js';
import { ErrorCodes, UserInputError } from '../util/index.js';
import { buildDag, canReachExit, findCycle, reachableFrom, type WorkflowDag } from './dag.js';
import type { NodeRole, WorkflowManifests } from './manifest-schemas.js';

/** One problem in a workflow directory: which file, where in it, and what was expected. */
export interface WorkflowIssue {
  file: string;
  /** `nodes[2].role`, or `(root)`. */
  path: string;
  message: string;
  /** Stable id of the validation rule, for tests and tooling. */
  rule: string;
}

export class WorkflowValidationError extends UserInputError {
  readonly issues: WorkflowIssue[];
  constructor(dir: string, issues: WorkflowIssue[]) {
    const lines = issues.slice(0, 20).map((issue) => `  ${issue.file} ${issue.path}: ${issue.message}`);
    const more = issues.length > 20 ? `\n  … and ${issues.length - 20} more` : '';
    super({
      code: ErrorCodes.invalidConfig,
      message: `The workflow in ${dir} is invalid (${issues.length} problem${issues.length === 1 ? '' : 's'}):\n${lines.join('\n')}${more}`,
      details: { dir, issues },
    });
    this.issues = issues;
  }
}

/** Formats a zod/array path the way the issues print it: `nodes[2].role`. */
export function formatIssuePath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out || '(root)';
}

/** In/out edge counts per role: [minIn, maxIn, minOut, maxOut]. */
const edgeCounts: Record<NodeRole, [number, number, number, number]> = {
  start: [0, 0, 1, 1],
  linear: [1, 1, 1, 1],
  decision: [1, 1, 2, Number.POSITIVE_INFINITY],
  branch: [1, 1, 2, Number.POSITIVE_INFINITY],
  split: [1, 1, 1, Number.POSITIVE_INFINITY],
  merge: [1, Number.POSITIVE_INFINITY, 1, 1],
  exit: [1, Number.POSITIVE_INFINITY, 0, 0],
};

function describeCount(min: number, max: number): string {
  if (min === max) return `exactly ${min}`;
  if (max === Number.POSITIVE_INFINITY) return `at least ${min}`;
  return `${min} to ${max}`;
}

export interface ValidateWorkflowOptions {
  /** Ids of the JSON Schemas found in `schemas/`. */
  schemaIds?: ReadonlySet<string>;
  /**
   * Whether the engine can run agent nodes that list tools (an engage loop was injected). When false such
   * nodes are invalid; when undefined (validating manifests alone) the rule is skipped.
   */
  agentToolsSupported?: boolean;
}

/** Load step 4: the DAG invariants (acyclic, one default START, exits, reachability, edge counts per role). */
export function validateDagInvariants(manifests: WorkflowManifests): WorkflowIssue[] {
  const issues: WorkflowIssue[] = [];
  const workflowFile = 'workflow.yaml';
  const add = (file: string, path: string, rule: string, message: string) =>
    issues.push({ file, path, rule, message });
  const { workflow } = manifests;

  const nodeIndex = new Map<string, number>();
  workflow.nodes.forEach((node, index) => {
    if (nodeIndex.has(node.id)) {
      add(
        workflowFile,
        `nodes[${index}].id`,
        'unique-node-ids',
        `expected a unique node id; "${node.id}" is also nodes[${nodeIndex.get(node.id)}]`,
      );
    } else nodeIndex.set(node.id, index);
  });
  const nodePath = (id: string) => `nodes[${nodeIndex.get(id)}]`;

  workflow.edges.forEach((edge, index) => {
    for (const end of ['from', 'to'] as const) {
      if (!nodeIndex.has(edge[end])) {
        add(
          workflowFile,
          `edges[${index}].${end}`,
          'edge-endpoints',
          `expected the id of a node; "${edge[end]}" is not one`,
        );
      }
    }
  });

  const dag: WorkflowDag = buildDag(workflow);
  const cycle = findCycle(dag);
  if (cycle.length > 0)
    add(workflowFile, 'edges', 'acyclic', `expected an acyclic graph; found the cycle ${cycle.join(' → ')}`);

  const starts = workflow.nodes.filter((node) => node.role === 'start');
  const flagged = starts.filter((node) => node.default_start);
  if (starts.length === 0) add(workflowFile, 'nodes', 'one-default-start', 'expected a node with role start');
  else if (flagged.length > 1) {
    add(
      workflowFile,
      'nodes',
      'one-default-start',
      `expected exactly one START with default_start: true; found ${flagged.map((node) => node.id).join(', ')}`,
    );
  } else if (flagged.length === 0 && starts.length > 1) {
    add(
      workflowFile,
      'nodes',
      'one-default-start',
      `expected one of the STARTs ${starts.map((node) => node.id).join(', ')} to set default_start: true`,
    );
  }
  for (const node of workflow.nodes) {
    if (node.default_start && node.role !== 'start') {
      add(
        workflowFile,
        `${nodePath(node.id)}.default_start`,
        'one-default-start',
        'expected default_start only on a START node',
      );
    }
  }
  if (dag.exitIds.length === 0)
    add(workflowFile, 'nodes', 'has-exit', 'expected at least one node with role exit');

  for (const node of dag.nodes.values()) {
    const path = nodePath(node.id);
    const [minIn, maxIn, minOut, maxOut] = edgeCounts[node.role];
    if (node.inDegree < minIn || node.inDegree > maxIn) {
      add(
        workflowFile,
        path,
        'edge-counts',
        `expected ${describeCount(minIn, maxIn)} inbound edge(s) for a ${node.role.toUpperCase()} node "${node.id}"; found ${node.inDegree}`,
      );
    }
    if (node.outEdges.length < minOut || node.outEdges.length > maxOut) {
      add(
        workflowFile,
        path,
        'edge-counts',
        `expected ${describeCount(minOut, maxOut)} outbound edge(s) for a ${node.role.toUpperCase()} node "${node.id}"; found ${node.outEdges.length}`,
      );
    }
    const manifest = node.manifest;
    if ((node.role === 'start' || node.role === 'exit') && manifest.kind !== 'deterministic') {
      add(
        workflowFile,
        `${path}.kind`,
        'start-exit-deterministic',
        `expected kind deterministic for the ${node.role.toUpperCase()} node "${node.id}"`,
      );
    }
    if (node.role === 'exit' && manifest.tools.length > 0) {
      add(
        workflowFile,
        `${path}.tools`,
        'exit-read-only',
        `expected no tools on the EXIT node "${node.id}": an exit only reports the status`,
      );
    }
    if (manifest.always_fail && node.role !== 'exit') {
      add(workflowFile, `${path}.always_fail`, 'exit-read-only', 'expected always_fail only on an EXIT node');
    }
    if (node.role === 'decision') {
      const labels = new Set<string>();
      node.outEdges.forEach((edge) => {
        const label = edge.label ?? edge.condition;
        if (!label) {
          add(
            workflowFile,
            `edges[${workflow.edges.indexOf(edge)}]`,
            'decision-labels',
            `expected a label (or condition) on every edge leaving the DECISION node "${node.id}"`,
          );
        } else if (labels.has(label)) {
          add(
            workflowFile,
            `edges[${workflow.edges.indexOf(edge)}].label`,
            'decision-labels',
            `expected unique labels on the edges leaving "${node.id}"; "${label}" repeats`,
          );
        } else labels.add(label);
      });
    }
  }

  if (dag.defaultStartId && cycle.length === 0) {
    const reachable = reachableFrom(dag, dag.startIds);
    const toExit = canReachExit(dag);
    for (const node of dag.nodes.values()) {
      if (!reachable.has(node.id)) {
        add(
          workflowFile,
          nodePath(node.id),
          'reachable',
          `expected node "${node.id}" to be reachable from a START (default: "${dag.defaultStartId}")`,
        );
      }
      if (dag.exitIds.length > 0 && !toExit.has(node.id)) {
        add(
          workflowFile,
          nodePath(node.id),
          'reaches-exit',
          `expected node "${node.id}" to have a path to an EXIT`,
        );
      }
    }
  }

  return issues;
}

/** Load step 2: references between manifests (agents, tools, policy, context profiles, schemas, credentials). */
export function validateReferences(
  manifests: WorkflowManifests,
  options: ValidateWorkflowOptions = {},
): WorkflowIssue[] {
  const issues: WorkflowIssue[] = [];
  const workflowFile = 'workflow.yaml';
  const add = (file: string, path: string, rule: string, message: string) =>
    issues.push({ file, path, rule, message });
  const { workflow } = manifests;
  const policy = createPolicy(manifests.policy);
  const nodeIndex = new Map<string, number>();
  workflow.nodes.forEach((node, index) => {
    if (!nodeIndex.has(node.id)) nodeIndex.set(node.id, index);
  });
  const nodePath = (id: string) => `nodes[${nodeIndex.get(id)}]`;

  const agents = new Map(manifests.agents.agents.map((agent) => [agent.id, agent]));
  const tools = new Set(manifests.tools.tools.map((tool) => tool.id));
  const profiles = new Set(manifests.memory.memory.context_profiles.map((profile) => profile.id));
  checkDuplicates(manifests.agents.agents, 'agents.yaml', 'agents', add);
  checkDuplicates(manifests.tools.tools, 'tools.yaml', 'tools', add);
  checkDuplicates(manifests.memory.memory.context_profiles, 'memory.yaml', 'memory.context_profiles', add);
  checkDuplicates(
    manifests.credentials.provider_credentials,
    'provider_credentials.yaml',
    'provider_credentials',
    add,
  );
  for (const profile of ['global', 'none']) {
    if (profiles.has(profile)) {
      add(
        'memory.yaml',
        'memory.context_profiles',
        'context-resolves',
        `expected a profile id other than the reserved "${profile}"`,
      );
    }
  }

  for (const node of workflow.nodes) {
    const path = nodePath(node.id);
    if (node.kind === 'agent') {
      if (!node.agent_id)
        add(
          workflowFile,
          `${path}.agent_id`,
          'agent-exists',
          `expected agent_id on the agent node "${node.id}"`,
        );
      else if (!agents.has(node.agent_id)) {
        add(
          workflowFile,
          `${path}.agent_id`,
          'agent-exists',
          `expected the id of an agent in agents.yaml; "${node.agent_id}" is not one`,
        );
      }
      if (node.tools.length > 0 && options.agentToolsSupported === false) {
        add(
          workflowFile,
          `${path}.tools`,
          'agent-tools-need-engage',
          `agent node "${node.id}" lists tools, which needs the engage loop; create the engine with runAgentWithTools (the agentd runtime does) or move the tools to a deterministic node`,
        );
      }
    } else if (node.agent_id) {
      add(
        workflowFile,
        `${path}.agent_id`,
        'agent-exists',
        `expected no agent_id on the deterministic node "${node.id}"`,
      );
    }
    node.tools.forEach((toolId, index) => {
      if (!tools.has(toolId)) {
        add(
          workflowFile,
          `${path}.tools[${index}]`,
          'tools-exist',
          `expected the id of a tool in tools.yaml; "${toolId}" is not one`,
        );
      } else {
        const decision = policy.check({ target: 'tool', targetId: toolId });
        if (!decision.allowed)
          add(
            workflowFile,
            `${path}.tools[${index}]`,
            'tools-allowed',
            `tool "${toolId}" is denied by policy "${decision.rule?.slice(0, decision.rule.lastIndexOf('#'))}" (${decision.reason})`,
          );
      }
    });
    if (node.context !== 'global' && node.context !== 'none' && !profiles.has(node.context)) {
      add(
        workflowFile,
        `${path}.context`,
        'context-resolves',
        `expected a context profile id from memory.yaml, "global" or "none"; "${node.context}" is not one`,
      );
    }
    if (options.schemaIds) {
      for (const field of ['inputs_schema_id', 'outputs_schema_id'] as const) {
        const id = node[field];
        if (id && !options.schemaIds.has(id)) {
          add(
            workflowFile,
            `${path}.${field}`,
            'schemas-resolve',
            `expected a JSON Schema file schemas/${id}.json in the workflow directory`,
          );
        }
      }
    }
  }

  const credentialIds = new Set(manifests.credentials.provider_credentials.map((entry) => entry.id));
  manifests.agents.agents.forEach((agent, index) => {
    if (agent.credential_id && !credentialIds.has(agent.credential_id)) {
      add(
        'agents.yaml',
        `agents[${index}].credential_id`,
        'credentials-resolve',
        `expected the id of an entry in provider_credentials.yaml; "${agent.credential_id}" is not one`,
      );
    }
  });
  return issues;
}

function checkDuplicates(
  entries: ReadonlyArray<{ id: string }>,
  file: string,
  path: string,
  add: (file: string, path: string, rule: string, message: string) => void,
): void {
  const seen = new Set<string>();
  entries.forEach((entry, index) => {
    if (seen.has(entry.id))
      add(file, `${path}[${index}].id`, 'unique-ids', `expected a unique id; "${entry.id}" repeats`);
    seen.add(entry.id);
  });
}
