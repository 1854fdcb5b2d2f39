// The durable workflow of the workflow diagnostics (bench/workflow-durable-ab.ts,
// bench/workflow-commit-times.ts): a chain of pure functions, START → n1 → … → nN → EXIT, run by a tree's
// compiled engine (dist/) on a SQLite store in a temporary directory (WAL, synchronous=NORMAL, as agentd runs it).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

/** The manifest of a chain of `nodeCount` function nodes between START and EXIT. */
function chainWorkflowYaml(nodeCount: number): { yaml: string; functionNodes: string[] } {
  const functionNodes = Array.from({ length: nodeCount }, (_, index) => `n${index + 1}`);
  const chain = ['start', ...functionNodes, 'exit'];
  const nodes = chain.map((id, index) => {
    const role = index === 0 ? 'start' : index === chain.length - 1 ? 'exit' : 'linear';
    return `  - { id: ${id}, role: ${role}, kind: deterministic, context: none }`;
  });
  const edges = chain.slice(1).map((id, index) => `  - { from: ${chain[index]}, to: ${id} }`);
  return {
    yaml: `version: 1\nid: chain\nnodes:\n${nodes.join('\n')}\nedges:\n${edges.join('\n')}\n`,
    functionNodes,
  };
}

/** A durable chain of `tree`'s engine: `run()` is one run of it; `close()` closes it and removes its files. */
export async function openDurableChain(
  tree: string,
  nodeCount: number,
): Promise<{ run: () => Promise<unknown>; close: () => Promise<void> }> {
  const load = (path: string) => import(pathToFileURL(join(tree, 'dist', path)).href);
  const workflows = await load('workflow/index.js');
  const { createStore } = await load('store/index.js');
  const { createBus } = await load('bus/index.js');
  const { yaml, functionNodes } = chainWorkflowYaml(nodeCount);
  const dir = mkdtempSync(join(tmpdir(), 'agentd-wf-chain-'));
  // Closed on a failure after it opened.
  let store: { db: unknown; close: () => Promise<void> } | undefined;
  try {
    const workflowDir = join(dir, 'workflow');
    mkdirSync(workflowDir);
    writeFileSync(join(workflowDir, 'workflow.yaml'), yaml);
    const opened: { db: unknown; close: () => Promise<void> } = await createStore({
      stateDir: dir,
      bus: createBus(),
    });
    store = opened;
    const pass = (input: unknown) => input;
    const engine = await workflows.createWorkflowEngine({
      workflow: await workflows.loadWorkflow(workflowDir),
      database: opened.db,
      workDir: workflowDir,
      functions: Object.fromEntries(functionNodes.map((id) => [id, pass])),
    });
    return {
      run: () => engine.run('x'),
      close: async () => {
        await engine.close();
        await opened.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}
