import { chmod, chown, lstat, mkdir, readdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { asFileNotWritten, fileNotWrittenCode } from '../../src/util/index.js';
import { fileToolCaller, repoRoot, runUnderFileSizeLimit, useTempDirs } from './helpers.js';

// write_file and edit_file replace a file whole or not at all: a full disk, the file-size limit or a kill
// partway through leaves the previous content (the workspace holds the agent's identity files).

const tempDir = useTempDirs();
const onWindows = process.platform === 'win32';

async function setup() {
  const workspace = await tempDir();
  await mkdir(path.join(workspace, 'src'));
  await writeFile(path.join(workspace, 'src', 'a.ts'), 'const a = 1;\n');
  await writeFile(path.join(workspace, 'notes.md'), 'hello\nworld\n');
  const call = fileToolCaller(workspace);
  return { workspace, call };
}

/** Every file below `dir` whose name marks it a leftover temporary file. */
async function leftovers(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true });
  return entries.filter((name) => name.endsWith('.tmp'));
}

// Runs in a child with a 64 KiB file-size limit: calls one file tool and prints its result or error. An
// argument "<big>" becomes 200 KiB of text (too long for a command line).
const big = '<big>';
const callTool = `
const { createFileTools } = await import(${JSON.stringify(pathToFileURL(path.join(repoRoot, 'src/tools/builtin/files.ts')).href)});
const [workspaceDir, name, args] = process.argv.slice(1);
const tool = createFileTools().find((candidate) => candidate.name === name);
const input = JSON.parse(args, (_, value) => (value === '${big}' ? 'x'.repeat(200 * 1024) : value));
try {
  const result = await tool.execute(tool.input.parse(input), { workspaceDir });
  console.log(JSON.stringify({ result }));
} catch (error) {
  console.log(JSON.stringify({ error: { code: error.code, retryable: error.retryable, message: error.message, details: error.details, errno: error.cause?.code ?? error.code } }));
}`;

describe('write_file and edit_file on a file system that refuses the write', () => {
  it.skipIf(onWindows)(
    'write_file past the file-size limit (EFBIG) keeps the old content, leaves no temporary file and says FILE_NOT_WRITTEN',
    async () => {
      const { workspace } = await setup();
      const outcome = await runUnderFileSizeLimit(callTool, [
        workspace,
        'write_file',
        JSON.stringify({ path: 'notes.md', content: big }),
      ]);
      // The old content first: before the fix the file was left holding the first 64 KiB of the new one.
      expect(await readFile(path.join(workspace, 'notes.md'), 'utf8')).toBe('hello\nworld\n');
      expect(await leftovers(workspace)).toEqual([]);
      expect(outcome).toEqual({
        error: {
          code: 'FILE_NOT_WRITTEN',
          retryable: false,
          errno: 'EFBIG',
          details: { path: 'notes.md', reason: 'EFBIG' },
          message: expect.stringContaining('notes.md'),
        },
      });
      expect(JSON.stringify(outcome)).not.toContain(workspace);
      // A new file that cannot be written whole is not left half written either.
      await runUnderFileSizeLimit(callTool, [
        workspace,
        'write_file',
        JSON.stringify({ path: 'src/new.md', content: big }),
      ]);
      expect(await readdir(path.join(workspace, 'src'))).toEqual(['a.ts']);
    },
    60_000,
  );

  it.skipIf(onWindows)(
    'edit_file past the file-size limit keeps the old content and leaves no temporary file',
    async () => {
      const { workspace } = await setup();
      const outcome = await runUnderFileSizeLimit(callTool, [
        workspace,
        'edit_file',
        JSON.stringify({ path: 'src/a.ts', old_text: '1', new_text: big }),
      ]);
      expect(await readFile(path.join(workspace, 'src', 'a.ts'), 'utf8')).toBe('const a = 1;\n');
      expect(await leftovers(workspace)).toEqual([]);
      expect(outcome).toMatchObject({ error: { code: 'FILE_NOT_WRITTEN', errno: 'EFBIG' } });
    },
    60_000,
  );

  it('maps a full disk, a used-up quota, the size limit and a read-only file system to FILE_NOT_WRITTEN', () => {
    const errno = (code: string) => Object.assign(new Error(`${code}: /abs/path/notes.md`), { code });
    for (const [code, retryable] of [
      ['ENOSPC', true],
      ['EDQUOT', true],
      ['EFBIG', false],
      ['EROFS', false],
    ] as const) {
      const mapped = asFileNotWritten(errno(code), 'notes.md');
      expect(mapped).toMatchObject({
        code: fileNotWrittenCode,
        fault: 'system',
        retryable,
        details: { path: 'notes.md', reason: code },
      });
      expect((mapped as Error).message).not.toContain('/abs/path');
    }
    expect(fileNotWrittenCode).toBe('FILE_NOT_WRITTEN');
    const other = errno('EISDIR');
    expect(asFileNotWritten(other, 'notes.md')).toBe(other);
  });
});

describe('write_file and edit_file replace the file whole', () => {
  it('keep the mode of the file they replace, and leave no temporary file', async () => {
    const { workspace, call } = await setup();
    const script = path.join(workspace, 'run.sh');
    await writeFile(script, 'echo one\n');
    await chmod(script, 0o750);
    await chmod(path.join(workspace, 'notes.md'), 0o600);
    await call('write_file', { path: 'run.sh', content: 'echo two\n' });
    await call('edit_file', { path: 'notes.md', old_text: 'world', new_text: 'there' });
    expect(await readFile(script, 'utf8')).toBe('echo two\n');
    expect(await readFile(path.join(workspace, 'notes.md'), 'utf8')).toBe('hello\nthere\n');
    if (!onWindows) {
      expect((await stat(script)).mode & 0o777).toBe(0o750);
      expect((await stat(path.join(workspace, 'notes.md'))).mode & 0o777).toBe(0o600);
    }
    expect(await leftovers(workspace)).toEqual([]);
  });

  it.skipIf(onWindows || process.getuid?.() !== 0)(
    'keep the owner of the file they replace when agentd may set it (as root)',
    async () => {
      const { workspace, call } = await setup();
      const notes = path.join(workspace, 'notes.md');
      await chown(notes, 4321, 4321);
      await call('edit_file', { path: 'notes.md', old_text: 'world', new_text: 'there' });
      expect(await stat(notes)).toMatchObject({ uid: 4321, gid: 4321 });
    },
  );

  it('a link inside the workspace is written through, as before: its target changes, the link stays', async () => {
    const { workspace, call } = await setup();
    await symlink('notes.md', path.join(workspace, 'alias.md'));
    await symlink(path.join(workspace, 'src'), path.join(workspace, 'code'));
    await call('write_file', { path: 'alias.md', content: 'through the link\n' });
    expect(await readFile(path.join(workspace, 'notes.md'), 'utf8')).toBe('through the link\n');
    await call('edit_file', { path: 'alias.md', old_text: 'through', new_text: 'edited through' });
    expect(await readFile(path.join(workspace, 'notes.md'), 'utf8')).toBe('edited through the link\n');
    await call('write_file', { path: 'code/a.ts', content: 'const a = 2;\n' });
    expect(await readFile(path.join(workspace, 'src', 'a.ts'), 'utf8')).toBe('const a = 2;\n');
    expect((await lstat(path.join(workspace, 'alias.md'))).isSymbolicLink()).toBe(true);
    expect((await lstat(path.join(workspace, 'code'))).isSymbolicLink()).toBe(true);
    expect(await leftovers(workspace)).toEqual([]);
  });

  it('a write that fails (a directory in the way) leaves no temporary file', async () => {
    const { workspace, call } = await setup();
    await expect(call('write_file', { path: 'src', content: 'x' })).rejects.toThrow();
    expect((await stat(path.join(workspace, 'src'))).isDirectory()).toBe(true);
    expect(await leftovers(workspace)).toEqual([]);
  });
});
