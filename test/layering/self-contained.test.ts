import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readSources, srcDir } from './import-graph.js';

const root = join(srcDir, '..');

describe('comments and docs stand on their own', () => {
  it('name no documents outside the repository (seed or issue numbers, ../shared)', () => {
    const pointer = /\bseed \d+|\bseed's\b|\bissue \d+|\.\.\/shared\//gi;
    const docs = [
      'README.md',
      'CONTRIBUTING.md',
      'bench/README.md',
      // The decision records too, which live a folder down.
      ...readdirSync(join(root, 'docs'), { recursive: true, encoding: 'utf8' })
        .filter((name) => name.endsWith('.md'))
        .map((name) => `docs/${name}`),
    ];
    const texts = [
      ...readSources(srcDir).map((file) => ({ path: `src/${file.path}`, text: file.text })),
      ...docs.map((path) => ({ path, text: readFileSync(join(root, path), 'utf8') })),
    ];
    const found = texts.flatMap(({ path, text }) =>
      [...text.matchAll(pointer)].map((match) => `${path}: ${match[0]}`),
    );
    expect(found).toEqual([]);
  });
});
