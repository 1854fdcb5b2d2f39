import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { srcDir } from './import-graph.js';

/** Names a folder's index.ts exports (re-exports with their exported name, and its own declarations). */
function exportedNames(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false);
  const names: string[] = [];
  for (const statement of source.statements) {
    if (
      ts.isExportDeclaration(statement) &&
      statement.exportClause &&
      ts.isNamedExports(statement.exportClause)
    )
      for (const element of statement.exportClause.elements) names.push(element.name.text);
    else if (
      ts.canHaveModifiers(statement) &&
      ts.getModifiers(statement)?.some((modifier) => modifier.kind === ts.SyntaxKind.ExportKeyword) &&
      'name' in statement &&
      statement.name &&
      ts.isIdentifier(statement.name as ts.Node)
    )
      names.push((statement.name as ts.Identifier).text);
  }
  return names;
}

describe('names across folders', () => {
  it('no two folders export a type or value under the same name from their index.ts', () => {
    const owners = new Map<string, string[]>();
    for (const entry of readdirSync(srcDir, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      let names: string[];
      try {
        names = exportedNames(join(srcDir, entry.name, 'index.ts'));
      } catch {
        continue;
      }
      for (const name of new Set(names)) owners.set(name, [...(owners.get(name) ?? []), entry.name]);
    }
    expect(owners.size).toBeGreaterThan(200);
    const shared = [...owners]
      .filter(([, folders]) => folders.length > 1)
      .map(([name, folders]) => `${name}: ${folders.join(', ')}`);
    expect(shared).toEqual([]);
  });
});
