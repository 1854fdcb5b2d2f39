import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createFileTools, type ToolDefinition } from '../../src/tools/index.js';
import { createToolContext, useTempDirs } from './helpers.js';

const tempDir = useTempDirs();

async function grepIn(workspace: string, options: Parameters<typeof createFileTools>[0] = {}) {
  const grep = createFileTools(options).find((tool) => tool.name === 'grep') as ToolDefinition;
  return (args: Record<string, unknown>, signal?: AbortSignal) =>
    grep.execute(grep.input.parse(args), createToolContext(workspace, signal ? { signal } : {}));
}

describe('grep against hostile patterns', () => {
  it('answers a catastrophic-backtracking pattern without blocking the event loop', async () => {
    const workspace = await tempDir();
    await writeFile(path.join(workspace, 'evil.txt'), `${'a'.repeat(29)}b\n${'a'.repeat(5000)}!\n`);
    const grep = await grepIn(workspace);
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 5);
    const result = await grep({ pattern: '^(a+)+$' });
    clearInterval(ticker);
    expect(result).toBe('No matches.');
    expect(ticks).toBeGreaterThan(0);
  });

  it('stops a search that outlives its time limit, keeping the loop free meanwhile', async () => {
    const workspace = await tempDir();
    // Linear time, but pattern × text is large enough that this cannot finish within 150 ms.
    await writeFile(path.join(workspace, 'big.txt'), 'a'.repeat(400_000));
    const grep = await grepIn(workspace, { grepTimeoutMs: 150 });
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 10);
    const result = await grep({ pattern: '(?:a?){500}a{500}$' });
    clearInterval(ticker);
    expect(result).toMatchObject({ isError: true, content: expect.stringContaining('stopped after 150 ms') });
    expect(ticks).toBeGreaterThanOrEqual(5);
  });

  it('refuses lookaround and backreferences with a clear INVALID_REQUEST', async () => {
    const grep = await grepIn(await tempDir());
    for (const pattern of ['(?<=a)b', '(a)\\1', 'a(?=b)']) {
      await expect(grep({ pattern })).rejects.toMatchObject({
        code: 'INVALID_REQUEST',
        message: expect.stringContaining('RE2 syntax'),
      });
    }
    await expect(grep({ pattern: 'x'.repeat(1001) })).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
  });

  it('keeps ignore_case, fixed strings and the match limit', async () => {
    const workspace = await tempDir();
    await writeFile(path.join(workspace, 'a.txt'), 'Hello\nhello\n(x+)\nHELLO\n');
    const grep = await grepIn(workspace);
    expect(await grep({ pattern: 'hello', ignore_case: true, max_matches: 2 })).toBe(
      'a.txt:1: Hello\na.txt:2: hello\n[… stopped at 2 matches]',
    );
    expect(await grep({ pattern: '(x+)', fixed_string: true })).toBe('a.txt:3: (x+)');
  });

  it('ends at once when the run is aborted', async () => {
    const workspace = await tempDir();
    await writeFile(path.join(workspace, 'big.txt'), 'a'.repeat(400_000));
    const grep = await grepIn(workspace);
    const controller = new AbortController();
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 10);
    const pending = grep({ pattern: '(?:a?){500}a{500}$' }, controller.signal);
    // Abort once the search is under way (the loop ticking proves it is not blocking meanwhile).
    await new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (ticks >= 3) {
          clearInterval(check);
          resolve();
        }
      }, 10);
    });
    controller.abort();
    clearInterval(ticker);
    expect(await pending).toMatchObject({ isError: true, content: 'The search was aborted.' });
  });
});
