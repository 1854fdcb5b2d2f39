import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openRegularFile, readAtMost } from '../../src/util/index.js';

describe('reading a file the agent may have made', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-regular-file-'));

  it('opens a regular file and reads it whole when it is within the limit', async () => {
    writeFileSync(join(dir, 'small.md'), 'hello');
    const opened = await openRegularFile(join(dir, 'small.md'));
    expect(opened?.size).toBe(5);
    try {
      expect((await readAtMost(opened!.handle, opened!.size, 64)).toString()).toBe('hello');
    } finally {
      await opened?.handle.close();
    }
  });

  it('reads one byte past the limit and no more, also from a file that grew after it was opened', async () => {
    const file = join(dir, 'growing.md');
    writeFileSync(file, 'x'.repeat(10));
    const opened = await openRegularFile(file);
    try {
      appendFileSync(file, 'y'.repeat(100_000));
      const bytes = await readAtMost(opened!.handle, opened!.size, 50_000);
      expect(bytes.length).toBe(50_001);
      expect(bytes.subarray(0, 12).toString()).toBe('xxxxxxxxxxyy');
    } finally {
      await opened?.handle.close();
    }
  });

  it('answers nothing for a FIFO (without waiting for a writer) or a directory, and ENOENT for no file', async () => {
    execFileSync('mkfifo', [join(dir, 'pipe')]);
    mkdirSync(join(dir, 'folder'));
    expect(await openRegularFile(join(dir, 'pipe'))).toBeUndefined();
    expect(await openRegularFile(join(dir, 'folder'))).toBeUndefined();
    await expect(openRegularFile(join(dir, 'missing'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
