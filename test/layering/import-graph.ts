/**
 * The import graph of `src/` between its units (top-level folders, with `runtime.ts` + `runtime/` as one
 * unit and the package entry points as `api`), checked against the layer table CONTRIBUTING.md lists.
 * TypeScript's parser finds the imports, so `import type`, re-exports, `import('…')` types and dynamic
 * `import()` all count, and comments or strings that merely look like imports do not.
 *
 *   npx tsx test/layering/import-graph.ts    # prints the Mermaid diagram docs/architecture.md embeds
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** Layer of every unit; a unit may import its own layer or lower ones, never a higher one. */
export const layers: Readonly<Record<string, number>> = {
  util: 0,
  store: 1,
  bus: 1,
  model: 1,
  config: 1,
  telemetry: 1,
  memory: 2,
  identity: 2,
  tools: 2,
  mcp: 2,
  ledger: 2,
  skills: 2,
  sandbox: 2,
  engage: 3,
  work: 4,
  agents: 4,
  workflow: 4,
  chat: 4,
  cron: 4,
  gateway: 5,
  cli: 5,
  acp: 5,
  runtime: 5,
  api: 6,
};

/** A source file: its path relative to `src/` (posix separators) and its text. */
export interface SourceFile {
  path: string;
  text: string;
}

export interface ImportEdge {
  from: string;
  to: string;
  fromUnit: string;
  toUnit: string;
  /** A `declare module` block merging into an interface of `to`. */
  augmentation: boolean;
}

export interface Violation {
  kind: 'unknown-unit' | 'upward' | 'bypasses-index' | 'cycle';
  message: string;
}

/** `runtime.ts` and the files of `runtime/` form the composition root; `index.ts`/`testing.ts` are `api`. */
export function unitOf(path: string): string {
  const [head, ...rest] = path.split('/');
  if (rest.length > 0) return head!;
  if (head === 'runtime.ts') return 'runtime';
  return 'api';
}

/** The one file other units may import a unit through. */
function entryOf(unit: string): string {
  return unit === 'runtime' ? 'runtime.ts' : `${unit}/index.ts`;
}

export function readSources(srcDir: string): SourceFile[] {
  const files: SourceFile[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.ts'))
        files.push({ path: relative(srcDir, full).split(sep).join('/'), text: readFileSync(full, 'utf8') });
    }
  };
  walk(srcDir);
  return files.sort((a, b) => a.path.localeCompare(b.path));
}

/**
 * Module specifiers a file names: imports, re-exports, dynamic `import()` and `declare module` blocks.
 * The last are declaration merging (how subsystems add events to the bus's map), which must name the very
 * file that declares the interface, so they are marked and exempt from the index rule.
 */
function specifiersOf(file: SourceFile): Array<{ specifier: string; augmentation: boolean }> {
  const found: Array<{ specifier: string; augmentation: boolean }> = [];
  const source = ts.createSourceFile(file.path, file.text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const visit = (node: ts.Node) => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    )
      found.push({ specifier: node.moduleSpecifier.text, augmentation: false });
    else if (ts.isModuleDeclaration(node) && ts.isStringLiteral(node.name))
      found.push({ specifier: node.name.text, augmentation: true });
    else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    )
      found.push({ specifier: node.arguments[0].text, augmentation: false });
    else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    )
      found.push({ specifier: node.argument.literal.text, augmentation: false });
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Relative imports between different units (package imports are not part of the layering). */
export function importEdges(files: readonly SourceFile[]): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const file of files) {
    for (const { specifier, augmentation } of specifiersOf(file)) {
      if (!specifier.startsWith('.')) continue;
      const to = posix.normalize(posix.join(posix.dirname(file.path), specifier)).replace(/\.js$/, '.ts');
      const fromUnit = unitOf(file.path);
      const toUnit = unitOf(to);
      if (fromUnit !== toUnit) edges.push({ from: file.path, to, fromUnit, toUnit, augmentation });
    }
  }
  return edges;
}

/** Every rule the layering enforces, as readable messages; empty when the graph is clean. */
export function checkLayering(files: readonly SourceFile[]): Violation[] {
  const violations: Violation[] = [];
  const units = new Set(files.map((file) => unitOf(file.path)));
  for (const unit of units)
    if (layers[unit] === undefined)
      violations.push({
        kind: 'unknown-unit',
        message: `src/${unit}/ has no layer: add it to the layer table (test/layering/import-graph.ts, CONTRIBUTING.md)`,
      });
  const edges = importEdges(files);
  for (const edge of edges) {
    const fromLayer = layers[edge.fromUnit];
    const toLayer = layers[edge.toUnit];
    if (fromLayer !== undefined && toLayer !== undefined && toLayer > fromLayer)
      violations.push({
        kind: 'upward',
        message: `${edge.from} (L${fromLayer} ${edge.fromUnit}) imports ${edge.to} (L${toLayer} ${edge.toUnit})`,
      });
    if (!edge.augmentation && edge.to !== entryOf(edge.toUnit))
      violations.push({
        kind: 'bypasses-index',
        message: `${edge.from} imports ${edge.to} instead of ${entryOf(edge.toUnit)}`,
      });
  }
  for (const cycle of unitCycles(edges))
    violations.push({ kind: 'cycle', message: `units import each other: ${cycle.join(' → ')}` });
  return violations;
}

/** One cycle per strongly connected group of units found by depth-first search. */
function unitCycles(edges: readonly ImportEdge[]): string[][] {
  const next = new Map<string, Set<string>>();
  for (const edge of edges) {
    if (!next.has(edge.fromUnit)) next.set(edge.fromUnit, new Set());
    next.get(edge.fromUnit)!.add(edge.toUnit);
  }
  const cycles: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (unit: string) => {
    state.set(unit, 'open');
    stack.push(unit);
    for (const target of [...(next.get(unit) ?? [])].sort()) {
      if (state.get(target) === 'open') cycles.push([...stack.slice(stack.indexOf(target)), target]);
      else if (!state.has(target)) visit(target);
    }
    stack.pop();
    state.set(unit, 'done');
  };
  for (const unit of [...next.keys()].sort()) if (!state.has(unit)) visit(unit);
  return cycles;
}

const labels: Record<string, string> = { api: 'index.ts, testing.ts', runtime: 'runtime.ts + runtime/' };

const layerNames = [
  'helpers',
  'foundations',
  'capabilities',
  'the loop',
  'orchestration',
  'edges',
  'public API',
];

/**
 * The unit graph as a Mermaid flowchart, one subgraph per layer, top layer first. Edges into `util/` are
 * left out: every folder uses it, and drawing twenty arrows to it would hide the rest.
 */
export function mermaidDiagram(files: readonly SourceFile[]): string {
  const units = [...new Set(files.map((file) => unitOf(file.path)))].sort();
  const pairs = [
    ...new Set(
      importEdges(files)
        .filter((edge) => edge.toUnit !== 'util')
        .map((edge) => `${edge.fromUnit} --> ${edge.toUnit}`),
    ),
  ].sort();
  const byLayer = new Map<number, string[]>();
  for (const unit of units) {
    const layer = layers[unit] ?? -1;
    byLayer.set(layer, [...(byLayer.get(layer) ?? []), unit]);
  }
  const lines = ['flowchart TB'];
  for (const layer of [...byLayer.keys()].sort((a, b) => b - a)) {
    lines.push(`  subgraph L${layer}[L${layer} — ${layerNames[layer] ?? 'no layer'}]`);
    for (const unit of byLayer.get(layer)!) lines.push(`    ${unit}[${labels[unit] ?? `${unit}/`}]`);
    lines.push('  end');
  }
  for (const pair of pairs) lines.push(`  ${pair}`);
  return lines.join('\n');
}

export const srcDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src');

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1])
  process.stdout.write(`${mermaidDiagram(readSources(srcDir))}\n`);
