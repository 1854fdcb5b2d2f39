import { describe, expect, it } from 'vitest';
import { readSources, srcDir } from './import-graph.js';

describe('error codes', () => {
  it('are written through a registry (ErrorCodes or a subsystem’s XxxErrorCodes), never as a string literal', () => {
    const literal = /\bcode:\s*['"][A-Z][A-Z0-9_]*['"]/g;
    const found = readSources(srcDir).flatMap((file) =>
      [...file.text.matchAll(literal)].map((match) => `${file.path}: ${match[0]}`),
    );
    expect(found).toEqual([]);
  });
});
