import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
