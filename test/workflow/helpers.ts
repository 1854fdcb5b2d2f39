import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { stringify } from 'yaml';
import { createManualClock, createSequentialIdGenerator } from '../../src/util/index.js';
import {
  type CreateWorkflowEngineOptions,
  createWorkflowEngine,
  loadWorkflow,
  type WorkflowEngine,
} from '../../src/workflow/index.js';

export function tempDir(prefix = 'agentd-wf-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Writes manifests (objects become YAML, strings are written as they are) into a fresh directory. */
export function writeWorkflow(files: Record<string, unknown>, dir = tempDir()): string {
  for (const [name, content] of Object.entries(files)) {
    const path = join(dir, name);
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(
      path,
      typeof content === 'string'
        ? content
        : name.endsWith('.json')
          ? JSON.stringify(content)
          : stringify(content),
    );
  }
  return dir;
}

export type NodeSpec = Record<string, unknown> & { id: string; role: string };

/** A node with the defaults most tests want: deterministic, no context. */
export function node(id: string, role: string, extra: Record<string, unknown> = {}): NodeSpec {
  return { id, role, kind: 'deterministic', context: 'none', ...extra };
}

export function edge(from: string, to: string, label?: string): Record<string, string> {
  return label ? { from, to, label } : { from, to };
}

/** start → n1 → … → nN → exit, all deterministic. */
export function chainWorkflow(length: number): { nodes: NodeSpec[]; edges: Array<Record<string, string>> } {
  const ids = Array.from({ length }, (_, index) => `n${index + 1}`);
  const nodes = [node('start', 'start'), ...ids.map((id) => node(id, 'linear')), node('exit', 'exit')];
  const order = ['start', ...ids, 'exit'];
  return { nodes, edges: order.slice(1).map((id, index) => edge(order[index]!, id)) };
}

export async function engineFor(
  files: Record<string, unknown>,
  options: Omit<CreateWorkflowEngineOptions, 'workflow'> = {},
): Promise<WorkflowEngine> {
  const dir = writeWorkflow(files);
  const workflow = await loadWorkflow(dir);
  const clock = createManualClock();
  return createWorkflowEngine({
    workflow,
    clock,
    idGenerator: createSequentialIdGenerator(),
    workDir: dir,
    ...options,
  });
}

export function workflowYaml(
  nodes: NodeSpec[],
  edges: Array<Record<string, string>>,
  extra: Record<string, unknown> = {},
) {
  return { version: 1, nodes, edges, ...extra };
}

/**
 * Creates engines through `engineFor` and closes every one still open after each test of the file;
 * `close` closes one at once, for a test that looks at what closing leaves behind.
 */
export function trackedEngines() {
  const engines: WorkflowEngine[] = [];
  afterEach(async () => {
    await Promise.all(engines.splice(0).map((engine) => engine.close()));
  });
  return {
    async make(...args: Parameters<typeof engineFor>): Promise<WorkflowEngine> {
      const engine = await engineFor(...args);
      engines.push(engine);
      return engine;
    },
    async close(engine: WorkflowEngine): Promise<void> {
      await engine.close();
      engines.splice(engines.indexOf(engine), 1);
    },
  };
}

export interface FanOutArm {
  id: string;
  /** The label of the edge from the fan node to this arm. */
  label?: string;
  /** Without a join, the EXIT this arm runs to (default: the shared `exit`). */
  exit?: string;
}

/**
 * start → fan → one linear node per arm, then either each arm → its EXIT, or every arm → join → after… →
 * exit. Nodes and edges come out in that order: the routing tests read labels and paths from it.
 */
export function fanOutWorkflow(options: {
  fan: NodeSpec;
  arms: FanOutArm[];
  join?: NodeSpec;
  after?: string[];
  exit?: string;
}) {
  const { fan, arms, join, after = [], exit = 'done' } = options;
  const nodes: NodeSpec[] = [node('start', 'start'), fan, ...arms.map((arm) => node(arm.id, 'linear'))];
  const edges = [edge('start', fan.id), ...arms.map((arm) => edge(fan.id, arm.id, arm.label))];
  if (join) {
    const tail = [join.id, ...after, exit];
    nodes.push(join, ...after.map((id) => node(id, 'linear')), node(exit, 'exit'));
    edges.push(...arms.map((arm) => edge(arm.id, join.id)));
    edges.push(...tail.slice(1).map((id, index) => edge(tail[index]!, id)));
  } else {
    const exits = [...new Set(arms.map((arm) => arm.exit ?? exit))];
    nodes.push(...exits.map((id) => node(id, 'exit')));
    edges.push(...arms.map((arm) => edge(arm.id, arm.exit ?? exit)));
  }
  return workflowYaml(nodes, edges);
}
