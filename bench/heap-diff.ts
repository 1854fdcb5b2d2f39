// Compares two V8 heap snapshots of one process (`v8.writeHeapSnapshot`, e.g. from `bench/soak.ts
// --heap-snapshots`) the way DevTools' Comparison view does, as Markdown: count and self size per
// constructor, objects new in the second snapshot and gone from the first (V8 keeps an object's id across
// snapshots of one process), where the net growth hangs (the retainer path from the root of every new and
// every deleted object, indices folded, net self size per path), and the objects whose entries grew most
// (Maps, Sets, arrays, objects used as dictionaries).
// Usage: npx tsx bench/heap-diff.ts <before.heapsnapshot> <after.heapsnapshot> [--top 20] [--operations N]
// With --operations (operations served between the two snapshots) growth is also shown in bytes per operation.
// Both snapshots are read whole: two of a 40 MB heap (40 MB files each) took about 450 MB of RSS and 11 s here.
import { readFileSync } from 'node:fs';
import { takeFlag } from './args.js';

const args = process.argv.slice(2);
const flag = (name: string) => takeFlag(args, name);
const top = Number(flag('--top') ?? 20);
const operationsFlag = flag('--operations');
const operations = operationsFlag ? Number(operationsFlag) : undefined;
const [fileA, fileB] = args;
if (!fileA || !fileB) {
  console.error('usage: heap-diff <before.heapsnapshot> <after.heapsnapshot> [--top 20] [--operations N]');
  process.exit(2);
}

interface RawSnapshot {
  snapshot: {
    meta: {
      node_fields: string[];
      node_types: [string[], ...unknown[]];
      edge_fields: string[];
      edge_types: [string[], ...unknown[]];
    };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

// Steps kept of a path from the root: the last ones, which name the holding structure. Paths are grouped from
// the last closure variable on (`system / Context.<name>`: agentd's factories keep their state in closures),
// else by their last `groupSteps`: a longer prefix differs between snapshots when another equally short path
// from the root wins.
const groupSteps = 7;
const contextSteps = 10;
const displaySteps = 14;

/** One snapshot, indexed: node ordinals (not array offsets), retainers, distance from the root. */
function load(file: string) {
  const raw = JSON.parse(readFileSync(file, 'utf8')) as RawSnapshot;
  const { meta } = raw.snapshot;
  const nodeFieldCount = meta.node_fields.length;
  const edgeFieldCount = meta.edge_fields.length;
  const typeOffset = meta.node_fields.indexOf('type');
  const nameOffset = meta.node_fields.indexOf('name');
  const idOffset = meta.node_fields.indexOf('id');
  const sizeOffset = meta.node_fields.indexOf('self_size');
  const edgeCountOffset = meta.node_fields.indexOf('edge_count');
  const edgeTypeOffset = meta.edge_fields.indexOf('type');
  const edgeNameOffset = meta.edge_fields.indexOf('name_or_index');
  const edgeToOffset = meta.edge_fields.indexOf('to_node');
  const nodeTypes = meta.node_types[0];
  const edgeTypes = meta.edge_types[0];
  const weakEdge = edgeTypes.indexOf('weak');
  const elementEdge = edgeTypes.indexOf('element');
  const hiddenEdge = edgeTypes.indexOf('hidden');
  const nodeCount = raw.nodes.length / nodeFieldCount;
  const edgeCount = raw.edges.length / edgeFieldCount;
  const { nodes, edges, strings } = raw;

  const firstEdge = new Uint32Array(nodeCount + 1);
  for (let node = 0; node < nodeCount; node++) {
    firstEdge[node + 1] = firstEdge[node]! + nodes[node * nodeFieldCount + edgeCountOffset]!;
  }
  const edgeTarget = new Uint32Array(edgeCount);
  for (let edge = 0; edge < edgeCount; edge++) {
    edgeTarget[edge] = edges[edge * edgeFieldCount + edgeToOffset]! / nodeFieldCount;
  }
  const edgeType = (edge: number) => edges[edge * edgeFieldCount + edgeTypeOffset]!;
  const edgeLabel = (edge: number) => {
    const type = edgeType(edge);
    if (type === elementEdge || type === hiddenEdge) return '[]';
    const name = edges[edge * edgeFieldCount + edgeNameOffset]!;
    // Internal edges of arrays and hash tables are numbered too.
    const label = strings[name] ?? String(name);
    return /^\d+$/.test(label) ? '[]' : label;
  };

  // Retainers (reverse edges, weak ones left out: they do not keep anything alive), as CSR arrays.
  const retainerCount = new Uint32Array(nodeCount + 1);
  for (let edge = 0; edge < edgeCount; edge++) {
    if (edgeType(edge) !== weakEdge) retainerCount[edgeTarget[edge]! + 1]!++;
  }
  for (let node = 0; node < nodeCount; node++) retainerCount[node + 1]! += retainerCount[node]!;
  const retainerEdge = new Uint32Array(retainerCount[nodeCount]!);
  const retainerNode = new Uint32Array(retainerCount[nodeCount]!);
  const fill = retainerCount.slice(0, nodeCount);
  for (let node = 0; node < nodeCount; node++) {
    for (let edge = firstEdge[node]!; edge < firstEdge[node + 1]!; edge++) {
      if (edgeType(edge) === weakEdge) continue;
      const slot = fill[edgeTarget[edge]!]!++;
      retainerEdge[slot] = edge;
      retainerNode[slot] = node;
    }
  }

  // Distance from the synthetic root over strong edges, so a path back to it is a shortest one.
  const distance = new Uint32Array(nodeCount).fill(0xffffffff);
  const queue = new Uint32Array(nodeCount);
  let head = 0;
  let tail = 0;
  distance[0] = 0;
  queue[tail++] = 0;
  while (head < tail) {
    const node = queue[head++]!;
    for (let edge = firstEdge[node]!; edge < firstEdge[node + 1]!; edge++) {
      if (edgeType(edge) === weakEdge) continue;
      const target = edgeTarget[edge]!;
      if (distance[target] !== 0xffffffff) continue;
      distance[target] = distance[node]! + 1;
      queue[tail++] = target;
    }
  }

  const type = (node: number) => nodeTypes[nodes[node * nodeFieldCount + typeOffset]!]!;
  const name = (node: number) => strings[nodes[node * nodeFieldCount + nameOffset]!]!;
  const id = (node: number) => nodes[node * nodeFieldCount + idOffset]!;
  const selfSize = (node: number) => nodes[node * nodeFieldCount + sizeOffset]!;

  /** DevTools' grouping: constructor name for objects, one group per kind for strings, code and the like. */
  const group = (node: number): string => {
    const kind = type(node);
    const label = name(node);
    switch (kind) {
      case 'object':
      case 'native':
      case 'synthetic':
        return label;
      case 'closure':
        return `(closure) ${label || '(anonymous)'}`;
      case 'string':
      case 'concatenated string':
      case 'sliced string':
        return '(string)';
      case 'number':
        return '(heap number)';
      case 'code':
        return label.startsWith('(') || label.startsWith('system /') ? `(code) ${label}` : '(compiled code)';
      case 'array':
      case 'hidden':
      case 'object shape':
        if (label === '') return `(${kind})`;
        return `(${kind}) ${label.length > 40 ? `${label.slice(0, 40)}…` : label}`;
      default:
        return `(${kind})`;
    }
  };

  /** The shortest strong path from the root, as `group.edge` steps; indices folded so paths group. */
  const path = (node: number, keep: number, fromContext = false): string => {
    const steps: string[] = [];
    let current = node;
    while (current !== 0 && steps.length < 64) {
      let best = -1;
      for (let slot = retainerCount[current]!; slot < retainerCount[current + 1]!; slot++) {
        if (distance[retainerNode[slot]!] === distance[current]! - 1) {
          best = slot;
          break;
        }
      }
      if (best < 0) {
        steps.push('(unreachable)');
        break;
      }
      const holder = retainerNode[best]!;
      steps.push(`${holder === 0 ? '(root)' : group(holder)}.${edgeLabel(retainerEdge[best]!)}`);
      current = holder;
    }
    steps.reverse();
    const context = fromContext ? steps.findLastIndex((step) => step.startsWith('system / Context.')) : -1;
    const from =
      context >= 0 && steps.length - context <= contextSteps ? context : Math.max(0, steps.length - keep);
    const kept = from > 0 ? ['…', ...steps.slice(from)] : steps;
    return `${kept.join(' → ')} → ${group(node)}`;
  };

  /** Entries an object holds: its own element/property edges plus those of its backing store or hash table. */
  const entries = (node: number): number => {
    let count = 0;
    for (let edge = firstEdge[node]!; edge < firstEdge[node + 1]!; edge++) {
      const kind = edgeTypes[edgeType(edge)];
      const label = edgeLabel(edge);
      if (kind === 'element' || (kind === 'property' && label !== '__proto__')) count++;
      else if (kind === 'internal' && ['table', 'elements', 'properties'].includes(label)) {
        const store = edgeTarget[edge]!;
        for (let inner = firstEdge[store]!; inner < firstEdge[store + 1]!; inner++) {
          if (edgeType(inner) !== weakEdge && edgeLabel(inner) !== 'map') count++;
        }
      }
    }
    return count;
  };

  const byId = new Map<number, number>();
  for (let node = 0; node < nodeCount; node++) byId.set(id(node), node);
  let totalSize = 0;
  for (let node = 0; node < nodeCount; node++) totalSize += selfSize(node);
  return { nodeCount, type, name, id, selfSize, group, path, entries, byId, totalSize, distance };
}

type Snapshot = ReturnType<typeof load>;

interface GroupRow {
  group: string;
  countA: number;
  countB: number;
  sizeA: number;
  sizeB: number;
  newCount: number;
  newSize: number;
  deletedCount: number;
  deletedSize: number;
}

const a = load(fileA);
const b = load(fileB);

const rows = new Map<string, GroupRow>();
const row = (group: string) => {
  let found = rows.get(group);
  if (!found) {
    found = {
      group,
      countA: 0,
      countB: 0,
      sizeA: 0,
      sizeB: 0,
      newCount: 0,
      newSize: 0,
      deletedCount: 0,
      deletedSize: 0,
    };
    rows.set(group, found);
  }
  return found;
};
// Net self size per retainer path: + for objects new in B, − for objects gone from A.
const paths = new Map<
  string,
  { size: number; count: number; newCount: number; deletedCount: number; example?: string }
>();
// The same per constructor, for the retainer paths of each grown one.
const pathsByGroup = new Map<string, Map<string, { size: number; count: number }>>();
const addPath = (group: string, key: string, size: number, count: number, example: () => string) => {
  const entry = paths.get(key) ?? { size: 0, count: 0, newCount: 0, deletedCount: 0 };
  entry.example ??= example();
  entry.size += size;
  entry.count += count;
  if (count > 0) entry.newCount++;
  else entry.deletedCount++;
  paths.set(key, entry);
  const ofGroup = pathsByGroup.get(group) ?? new Map<string, { size: number; count: number }>();
  const grouped = ofGroup.get(key) ?? { size: 0, count: 0 };
  grouped.size += size;
  grouped.count += count;
  ofGroup.set(key, grouped);
  pathsByGroup.set(group, ofGroup);
};
const reachable = (snapshot: Snapshot, node: number) => snapshot.distance[node] !== 0xffffffff;

for (let node = 0; node < a.nodeCount; node++) {
  const group = a.group(node);
  const entry = row(group);
  entry.countA++;
  entry.sizeA += a.selfSize(node);
  if (!b.byId.has(a.id(node))) {
    entry.deletedCount++;
    entry.deletedSize += a.selfSize(node);
    if (reachable(a, node))
      addPath(group, a.path(node, groupSteps, true), -a.selfSize(node), -1, () => a.path(node, displaySteps));
  }
}
for (let node = 0; node < b.nodeCount; node++) {
  const group = b.group(node);
  const entry = row(group);
  entry.countB++;
  entry.sizeB += b.selfSize(node);
  if (!a.byId.has(b.id(node))) {
    entry.newCount++;
    entry.newSize += b.selfSize(node);
    if (reachable(b, node))
      addPath(group, b.path(node, groupSteps, true), b.selfSize(node), 1, () => b.path(node, displaySteps));
  }
}

// Objects in both snapshots whose entries grew: an unbounded Map, Set, array or dictionary shows here.
const containers: Array<{ node: number; entriesA: number; entriesB: number }> = [];
for (let node = 0; node < b.nodeCount; node++) {
  if (b.type(node) !== 'object') continue;
  const before = a.byId.get(b.id(node));
  if (before === undefined) continue;
  const entriesA = a.entries(before);
  const entriesB = b.entries(node);
  if (entriesB > entriesA) containers.push({ node, entriesA, entriesB });
}
containers.sort((left, right) => right.entriesB - right.entriesA - (left.entriesB - left.entriesA));

const kb = (bytes: number) => (bytes / 1024).toFixed(1);
const signed = (value: number, digits = 1) => `${value >= 0 ? '+' : ''}${value.toFixed(digits)}`;
const cell = (text: string) => text.replaceAll('|', '\\|');
const delta = b.totalSize - a.totalSize;
const topPaths = [...paths.entries()].sort(([, left], [, right]) => right.size - left.size).slice(0, top);
const topGroups = [...rows.values()]
  .sort((left, right) => right.sizeB - right.sizeA - (left.sizeB - left.sizeA))
  .slice(0, top);
// Retainer paths shown per grown constructor.
const pathsPerGroup = 3;
const lines = [
  `Snapshots: \`${fileA}\` → \`${fileB}\`.`,
  '',
  '| figure | before | after | change |',
  '|---|---|---|---|',
  `| nodes | ${a.nodeCount} | ${b.nodeCount} | ${signed(b.nodeCount - a.nodeCount, 0)} |`,
  `| self size, all nodes (KB) | ${kb(a.totalSize)} | ${kb(b.totalSize)} | ${signed(delta / 1024)} |`,
  ...(operations
    ? [`| growth per operation (bytes, ${operations} operations) | | | ${signed(delta / operations)} |`]
    : []),
  '',
  `Top ${top} constructors by growth of self size (new: in the second snapshot only; deleted: in the first only):`,
  '',
  '| constructor | count before | count after | Δ count | KB before | KB after | Δ KB | new | deleted |',
  '|---|---|---|---|---|---|---|---|---|',
  ...topGroups.map(
    (entry) =>
      `| ${cell(entry.group)} | ${entry.countA} | ${entry.countB} | ${signed(entry.countB - entry.countA, 0)} | ${kb(entry.sizeA)} | ${kb(entry.sizeB)} | ${signed((entry.sizeB - entry.sizeA) / 1024)} | ${entry.newCount} | ${entry.deletedCount} |`,
  ),
  '',
  `Where each of them grew: its ${pathsPerGroup} retainer paths with the most net growth (as below):`,
  '',
  '| constructor | Δ KB | Δ objects | path |',
  '|---|---|---|---|',
  ...topGroups
    .filter((entry) => entry.sizeB > entry.sizeA)
    .flatMap((entry) =>
      [...(pathsByGroup.get(entry.group) ?? new Map<string, { size: number; count: number }>()).entries()]
        .filter(([, grouped]) => grouped.size > 0)
        .sort(([, left], [, right]) => right.size - left.size)
        .slice(0, pathsPerGroup)
        .map(
          ([key, grouped]) =>
            `| ${cell(entry.group)} | ${signed(grouped.size / 1024)} | ${signed(grouped.count, 0)} | ${cell(key)} |`,
        ),
    ),
  '',
  `Top ${top} retainer paths by net growth (self size of new objects minus that of deleted ones on the same`,
  'shortest path from the root, from the closure variable that holds them; indices folded to []):',
  '',
  '| # | Δ KB | Δ objects | new | deleted | path |',
  '|---|---|---|---|---|---|',
  ...topPaths.map(
    ([key, entry], index) =>
      `| ${index + 1} | ${signed(entry.size / 1024)} | ${signed(entry.count, 0)} | ${entry.newCount} | ${entry.deletedCount} | ${cell(key)} |`,
  ),
  '',
  'A whole path from the root of one object of each (the first seen):',
  '',
  ...topPaths.map(([, entry], index) => `${index + 1}. ${entry.example}`),
  '',
  `Top ${top} objects present in both by growth of their entries (own elements and properties, and those`,
  'of their backing store or hash table; a Map counts 2 per entry, its key and its value):',
  '',
  '| entries before | entries after | object and its path |',
  '|---|---|---|',
  ...containers
    .slice(0, top)
    .map(
      ({ node, entriesA, entriesB }) => `| ${entriesA} | ${entriesB} | ${cell(b.path(node, displaySteps))} |`,
    ),
  '',
];
process.stdout.write(lines.join('\n'));
