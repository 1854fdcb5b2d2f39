import type {
  NodeRole,
  WorkflowEdgeManifest,
  WorkflowManifest,
  WorkflowNodeManifest,
} from './manifest-schemas.js';

/** A node of the built DAG: the manifest entry plus its edges, resolved once so routing does no lookups. */
export interface DagNode {
  readonly manifest: WorkflowNodeManifest;
  readonly id: string;
  readonly role: NodeRole;
  /** Outbound edges in manifest order; routing (`i mod n`, clone order) depends on this order. */
  readonly outEdges: ReadonlyArray<WorkflowEdgeManifest>;
  readonly inDegree: number;
}

export interface WorkflowDag {
  readonly nodes: ReadonlyMap<string, DagNode>;
  /** Node ids in manifest order. */
  readonly order: ReadonlyArray<string>;
  /** `undefined` only in an invalid workflow (validation reports it). */
  readonly defaultStartId: string | undefined;
  readonly startIds: ReadonlyArray<string>;
  readonly exitIds: ReadonlyArray<string>;
}

/** Builds the adjacency of the workflow. Edges naming unknown nodes are skipped here and reported by validation. */
export function buildDag(workflow: WorkflowManifest): WorkflowDag {
  const outEdges = new Map<string, WorkflowEdgeManifest[]>();
  const inDegree = new Map<string, number>();
  const known = new Set(workflow.nodes.map((node) => node.id));
  for (const edge of workflow.edges) {
    if (!known.has(edge.from) || !known.has(edge.to)) continue;
    const list = outEdges.get(edge.from);
    if (list) list.push(edge);
    else outEdges.set(edge.from, [edge]);
    inDegree.set(edge.to, (inDegree.get(edge.to) ?? 0) + 1);
  }
  const nodes = new Map<string, DagNode>();
  for (const manifest of workflow.nodes) {
    if (nodes.has(manifest.id)) continue;
    nodes.set(manifest.id, {
      manifest,
      id: manifest.id,
      role: manifest.role,
      outEdges: outEdges.get(manifest.id) ?? [],
      inDegree: inDegree.get(manifest.id) ?? 0,
    });
  }
  const starts = workflow.nodes.filter((node) => node.role === 'start');
  const flagged = starts.filter((node) => node.default_start);
  // A lone START is the default even without the flag; with several, exactly one must carry it.
  const defaultStart =
    flagged.length === 1 ? flagged[0] : flagged.length === 0 && starts.length === 1 ? starts[0] : undefined;
  return {
    nodes,
    order: [...nodes.keys()],
    defaultStartId: defaultStart?.id,
    startIds: starts.map((node) => node.id),
    exitIds: workflow.nodes.filter((node) => node.role === 'exit').map((node) => node.id),
  };
}

/** Node ids in a cycle, or an empty list. Iterative DFS so deep chains cannot overflow the stack. */
export function findCycle(dag: WorkflowDag): string[] {
  const state = new Map<string, 1 | 2>();
  for (const root of dag.order) {
    if (state.has(root)) continue;
    const stack: Array<{ id: string; next: number }> = [{ id: root, next: 0 }];
    const path: string[] = [root];
    state.set(root, 1);
    while (stack.length > 0) {
      const frame = stack[stack.length - 1]!;
      const edges = dag.nodes.get(frame.id)!.outEdges;
      if (frame.next >= edges.length) {
        state.set(frame.id, 2);
        stack.pop();
        path.pop();
        continue;
      }
      const target = edges[frame.next++]!.to;
      const seen = state.get(target);
      if (seen === 1) return [...path.slice(path.indexOf(target)), target];
      if (seen === undefined) {
        state.set(target, 1);
        stack.push({ id: target, next: 0 });
        path.push(target);
      }
    }
  }
  return [];
}

export function reachableFrom(dag: WorkflowDag, roots: Iterable<string>): Set<string> {
  const seen = new Set<string>();
  const pending = [...roots];
  while (pending.length > 0) {
    const id = pending.pop()!;
    if (seen.has(id) || !dag.nodes.has(id)) continue;
    seen.add(id);
    for (const edge of dag.nodes.get(id)!.outEdges) pending.push(edge.to);
  }
  return seen;
}

/** Nodes from which some EXIT can be reached (reverse reachability). */
export function canReachExit(dag: WorkflowDag): Set<string> {
  const reverse = new Map<string, string[]>();
  for (const node of dag.nodes.values()) {
    for (const edge of node.outEdges) {
      const list = reverse.get(edge.to);
      if (list) list.push(node.id);
      else reverse.set(edge.to, [node.id]);
    }
  }
  const seen = new Set<string>();
  const pending = [...dag.exitIds];
  while (pending.length > 0) {
    const id = pending.pop()!;
    if (seen.has(id)) continue;
    seen.add(id);
    for (const source of reverse.get(id) ?? []) pending.push(source);
  }
  return seen;
}
