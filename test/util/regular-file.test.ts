import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openRegularFile, readAtMost, readRegularFile } from '../../src/util/index.js';

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

  it('reads a whole file within the limit, and says why it did not read another', async () => {
    writeFileSync(join(dir, 'limit.md'), 'x'.repeat(100));
    expect(await readRegularFile(join(dir, 'limit.md'), 100)).toEqual({
      bytes: Buffer.from('x'.repeat(100)),
    });
    expect(await readRegularFile(join(dir, 'limit.md'), 99)).toEqual({ refused: 'too large', size: 100 });
    execFileSync('mkfifo', [join(dir, 'another-pipe')]);
    expect(await readRegularFile(join(dir, 'another-pipe'), 100)).toEqual({ refused: 'not a regular file' });
    writeFileSync(join(dir, 'empty.md'), '');
    expect(await readRegularFile(join(dir, 'empty.md'), 100)).toEqual({ bytes: Buffer.alloc(0) });
  });
});
