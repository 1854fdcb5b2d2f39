import { describe, expect, it } from 'vitest';
import type { MemoryContext } from '../../../src/memory/service/context.js';
import {
  cachedPromptLine,
  maxCachedLines,
  promptLineCache,
} from '../../../src/memory/service/prompt-lines.js';

const entry = (rowId: number, content = `note ${rowId}`) =>
  cachedPromptLine(
    {
      agentId: 'alpha',
      sessionKey: 'agent:alpha:main',
      memoryId: rowId,
      content,
      createdAtMs: 0,
      speaker: 'user',
    },
    280,
  );

describe('memory step: automatic recall line cache', () => {
  it('drops the oldest entries first, one for each past the limit', () => {
    // The cache is keyed by its memory context; any object stands for one here.
    const cache = promptLineCache({} as MemoryContext);
    for (let rowId = 1; rowId <= maxCachedLines + 4; rowId++) cache.set(rowId, entry(rowId));
    expect(cache.size).toBe(maxCachedLines);
    expect([1, 2, 3, 4].map((rowId) => cache.get(rowId))).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect(cache.get(5)?.content).toBe('note 5');
    expect(cache.get(maxCachedLines + 4)?.content).toBe(`note ${maxCachedLines + 4}`);
    let expected = 0;
    for (let rowId = 5; rowId <= maxCachedLines + 4; rowId++) expected += `note ${rowId}`.length;
    expect(cache.chars).toBe(expected);
  });

  it('stays bounded and keeps the newest entries over many rounds of inserts', () => {
    const cache = promptLineCache({} as MemoryContext);
    const total = 10 * maxCachedLines + 123;
    for (let rowId = 1; rowId <= total; rowId++) cache.set(rowId, entry(rowId, 'x'));
    expect(cache.size).toBe(maxCachedLines);
    expect(cache.get(total - maxCachedLines)).toBeUndefined();
    expect(cache.get(total - maxCachedLines + 1)).toBeDefined();
    expect(cache.chars).toBe(maxCachedLines);
  });

  it('replaces an entry set again, counting its characters once', () => {
    const cache = promptLineCache({} as MemoryContext);
    cache.set(7, entry(7, 'short'));
    cache.set(7, entry(7, 'a longer text'));
    expect(cache.size).toBe(1);
    expect(cache.get(7)?.content).toBe('a longer text');
    expect(cache.chars).toBe('a longer text'.length);
    // Its first place in line no longer counts against the limit.
    for (let rowId = 100; rowId < 100 + maxCachedLines - 1; rowId++) cache.set(rowId, entry(rowId, 'y'));
    expect(cache.size).toBe(maxCachedLines);
  });
});
