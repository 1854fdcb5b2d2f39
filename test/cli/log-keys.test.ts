import { describe, expect, it } from 'vitest';
import { captureLog, startRuntime } from '../runtime/helpers.js';

/** Keys that occur more than once at the top level of one JSON log line. */
function repeatedKeys(line: string): string[] {
  const seen = new Set<string>();
  const repeated: string[] = [];
  let depth = 0;
  let inString = false;
  let start = -1;
  for (let i = 0; i < line.length; i++) {
    const char = line[i];
    if (inString) {
      if (char === '\\') i++;
      else if (char === '"') {
        inString = false;
        // A string at depth 1 followed by a colon is a top-level key.
        if (depth === 1 && line[i + 1] === ':') {
          const key = line.slice(start + 1, i);
          if (seen.has(key)) repeated.push(key);
          seen.add(key);
        }
      }
    } else if (char === '"') {
      inString = true;
      start = i;
    } else if (char === '{' || char === '[') depth++;
    else if (char === '}' || char === ']') depth--;
  }
  return repeated;
}

describe('JSON log lines', () => {
  it('carry each key once (the store and its migrations log as one component)', async () => {
    expect(repeatedKeys('{"a":1,"b":{"a":2},"a":3}')).toEqual(['a']);
    const log = captureLog();
    const started = await startRuntime({ log });
    await started.runtime.close();
    const lines = log.text().trim().split('\n');
    expect(lines.some((line) => line.includes('"msg":"applied migration"'))).toBe(true);
    expect(
      lines.flatMap((line) => repeatedKeys(line).map((key) => `${key} in ${line.slice(0, 160)}`)),
    ).toEqual([]);
  });
});
