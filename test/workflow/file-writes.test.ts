import { chmod, lstat, mkdir, readdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createScopedFiles } from '../../src/workflow/tools.js';
import { repoRoot, runUnderFileSizeLimit, useTempDirs } from '../tools/helpers.js';

// The file access of workflow tools (`ctx.files.write`, the builtin write_file) replaces a file whole or
// not at all: a full disk or the file-size limit leaves the previous content and no temporary file.

const tempDir = useTempDirs();
const onWindows = process.platform === 'win32';

async function setup() {
  const workDir = await tempDir();
  await mkdir(path.join(workDir, 'files'));
  await writeFile(path.join(workDir, 'files', 'notes.md'), 'hello\n');
  return { workDir, root: path.join(workDir, 'files'), files: createScopedFiles(workDir, 'files') };
}

async function leftovers(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true })).filter((name) => name.endsWith('.tmp'));
}

// In a child with a 64 KiB file-size limit: writes 200 KiB through ctx.files.write or the builtin
// write_file, and prints the result or the error.
const writeBig = `
const { createScopedFiles, builtinFunctions } = await import(${JSON.stringify(pathToFileURL(path.join(repoRoot, 'src/workflow/tools.ts')).href)});
const [workDir, how, file] = process.argv.slice(1);
const files = createScopedFiles(workDir, 'files');
const content = 'x'.repeat(200 * 1024);
try {
  const result = how === 'builtin'
    ? await builtinFunctions.write_file({ path: file, content }, { files })
    : await files.write(file, content);
  console.log(JSON.stringify({ result }));
} catch (error) {
  console.log(JSON.stringify({ error: { code: error.code, retryable: error.retryable, details: error.details, message: error.message } }));
}`;

describe('workflow file writes on a file system that refuses the write', () => {
  it.skipIf(onWindows)(
    'past the file-size limit: FILE_NOT_WRITTEN, the old content kept, no temporary file',
    async () => {
      const { workDir, root } = await setup();
      for (const how of ['files', 'builtin']) {
        const outcome = await runUnderFileSizeLimit(writeBig, [workDir, how, 'notes.md']);
        expect(await readFile(path.join(root, 'notes.md'), 'utf8')).toBe('hello\n');
        expect(await leftovers(workDir)).toEqual([]);
        expect(outcome).toEqual({
          error: {
            code: 'FILE_NOT_WRITTEN',
            retryable: false,
            details: { path: 'notes.md', reason: 'EFBIG' },
            message: expect.stringContaining('notes.md'),
          },
        });
        expect(JSON.stringify(outcome)).not.toContain(workDir);
      }
      await runUnderFileSizeLimit(writeBig, [workDir, 'files', 'deep/new.md']);
      expect(await readdir(path.join(root, 'deep'))).toEqual([]);
    },
    60_000,
  );
});

describe('workflow file writes', () => {
  it('keep the mode of the file they replace and leave no temporary file', async () => {
    const { root, files } = await setup();
    await chmod(path.join(root, 'notes.md'), 0o640);
    expect(await files.write('notes.md', 'again\n')).toEqual({ path: 'notes.md', bytes: 6 });
    expect(await files.write('sub/new.md', 'new\n')).toEqual({ path: 'sub/new.md', bytes: 4 });
    expect(await readFile(path.join(root, 'notes.md'), 'utf8')).toBe('again\n');
    expect(await readFile(path.join(root, 'sub', 'new.md'), 'utf8')).toBe('new\n');
    if (!onWindows) expect((await stat(path.join(root, 'notes.md'))).mode & 0o777).toBe(0o640);
    expect(await leftovers(root)).toEqual([]);
  });

  it('a link inside the root is written through, as before: its target changes, the link stays', async () => {
    const { root, files } = await setup();
    await symlink('notes.md', path.join(root, 'alias.md'));
    expect(await files.write('alias.md', 'through\n')).toEqual({ path: 'notes.md', bytes: 8 });
    expect(await readFile(path.join(root, 'notes.md'), 'utf8')).toBe('through\n');
    expect((await lstat(path.join(root, 'alias.md'))).isSymbolicLink()).toBe(true);
    expect(await leftovers(root)).toEqual([]);
  });
});
