import { execFileSync } from 'node:child_process';
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveWorkspacePath } from '../../src/tools/index.js';
import { AgentdError } from '../../src/util/index.js';
import { fileToolCaller, useTempDirs } from './helpers.js';

const tempDir = useTempDirs();

async function setup() {
  const outside = await tempDir();
  const workspace = await tempDir();
  await writeFile(path.join(outside, 'secret.txt'), 'top secret');
  await mkdir(path.join(workspace, 'src'));
  await writeFile(path.join(workspace, 'src', 'a.ts'), 'const a = 1;\nexport const b = a + 1;\n');
  await writeFile(path.join(workspace, 'notes.md'), 'hello\nworld\n');
  const call = fileToolCaller(workspace);
  return { outside, workspace, call };
}

async function expectOutside(promise: Promise<unknown>) {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(AgentdError.isInstance(error) ? error.code : error).toBe('PATH_OUTSIDE_WORKSPACE');
}

describe('workspace confinement', () => {
  it('rejects .. traversal and absolute paths outside the workspace', async () => {
    const { outside, call } = await setup();
    await expectOutside(call('read_file', { path: '../secret.txt' }));
    await expectOutside(call('read_file', { path: 'src/../../secret.txt' }));
    await expectOutside(call('read_file', { path: path.join(outside, 'secret.txt') }));
    await expectOutside(call('write_file', { path: '../planted.txt', content: 'x' }));
    await expectOutside(call('list_files', { path: '..' }));
    await expectOutside(call('grep', { pattern: 'secret', path: outside }));
  });

  it('rejects symlinks that escape, for reads and for writes, dangling links included', async () => {
    const { outside, workspace, call } = await setup();
    await symlink(path.join(outside, 'secret.txt'), path.join(workspace, 'link.txt'));
    await symlink(outside, path.join(workspace, 'outdir'));
    await symlink(path.join(outside, 'not-there-yet.txt'), path.join(workspace, 'dangling.txt'));
    await expectOutside(call('read_file', { path: 'link.txt' }));
    await expectOutside(call('read_file', { path: 'outdir/secret.txt' }));
    await expectOutside(call('write_file', { path: 'outdir/new.txt', content: 'x' }));
    await expectOutside(call('edit_file', { path: 'link.txt', old_text: 'top', new_text: 'no' }));
    await expectOutside(call('write_file', { path: 'dangling.txt', content: 'x' }));
    await expectOutside(call('write_file', { path: 'outdir/deeper/new.txt', content: 'x' }));
    expect(await readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('top secret');
    await expect(readFile(path.join(outside, 'not-there-yet.txt'))).rejects.toThrow();
  });

  it('accepts symlinks that stay inside and absolute paths inside', async () => {
    const { workspace, call } = await setup();
    await symlink(path.join(workspace, 'src'), path.join(workspace, 'code'));
    expect(await call('read_file', { path: 'code/a.ts' })).toContain('const a = 1');
    expect(await call('read_file', { path: path.join(workspace, 'notes.md') })).toBe('hello\nworld\n');
    const resolved = await resolveWorkspacePath(workspace, 'new/dir/file.txt');
    expect(resolved).toMatchObject({ relativePath: 'new/dir/file.txt', exists: false });
  });
});

describe('file tools', () => {
  it('read_file returns a line range', async () => {
    const { call } = await setup();
    expect(await call('read_file', { path: 'src/a.ts', start_line: 2, line_count: 1 })).toBe(
      'export const b = a + 1;',
    );
  });

  it('read_file and edit_file refuse a FIFO without blocking on it', async () => {
    // The model can make one with bash; reading it would wait for a writer forever. (A link to a device
    // leads out of the workspace and is refused before: PATH_OUTSIDE_WORKSPACE.)
    const { workspace, call } = await setup();
    execFileSync('mkfifo', [path.join(workspace, 'pipe.md')]);
    for (const args of [{}, { old_text: 'a', new_text: 'b' }])
      await expect(
        call('old_text' in args ? 'edit_file' : 'read_file', { path: 'pipe.md', ...args }),
      ).rejects.toMatchObject({ code: 'INVALID_REQUEST', message: 'pipe.md is not a regular file.' });
    // grep passes over it, asked for the folder or for the FIFO itself.
    expect(await call('grep', { pattern: 'world' })).toBe('notes.md:2: world');
    expect(await call('grep', { pattern: 'world', path: 'pipe.md' })).toMatch(/^No matches/);
  });

  it('write_file creates parents; edit_file replaces a unique match and refuses ambiguity', async () => {
    const { workspace, call } = await setup();
    await call('write_file', { path: 'deep/dir/x.txt', content: 'one two one' });
    expect(await readFile(path.join(workspace, 'deep/dir/x.txt'), 'utf8')).toBe('one two one');
    expect(await call('edit_file', { path: 'deep/dir/x.txt', old_text: 'one', new_text: '1' })).toMatchObject(
      {
        isError: true,
        content: expect.stringContaining('occurs 2 times'),
      },
    );
    await call('edit_file', { path: 'deep/dir/x.txt', old_text: 'two', new_text: '$&2' });
    expect(await readFile(path.join(workspace, 'deep/dir/x.txt'), 'utf8')).toBe('one $&2 one');
    await call('edit_file', { path: 'deep/dir/x.txt', old_text: 'one', new_text: '1', replace_all: true });
    expect(await readFile(path.join(workspace, 'deep/dir/x.txt'), 'utf8')).toBe('1 $&2 1');
  });

  it('edit_file refuses a replace_all whose result would pass the file size limit, before building it', async () => {
    const { workspace, call } = await setup();
    const file = path.join(workspace, 'many-a.txt');
    await call('write_file', { path: 'many-a.txt', content: 'a'.repeat(10_000) });
    // 10,000 occurrences of 200 bytes each: a 2 MB file from a 10 KB one, past the 1 MiB limit.
    await expect(
      call('edit_file', { path: 'many-a.txt', old_text: 'a', new_text: 'b'.repeat(200), replace_all: true }),
    ).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    expect(await readFile(file, 'utf8')).toBe('a'.repeat(10_000));
    // Within the limit it is done.
    await call('edit_file', { path: 'many-a.txt', old_text: 'a', new_text: 'bb', replace_all: true });
    expect(await readFile(file, 'utf8')).toBe('b'.repeat(20_000));
  });

  it('list_files marks directories and links and does not follow links', async () => {
    const { outside, workspace, call } = await setup();
    await symlink(outside, path.join(workspace, 'outdir'));
    expect(await call('list_files', { path: '.', recursive: true })).toBe(
      ['notes.md', 'outdir@', 'src/', 'src/a.ts'].join('\n'),
    );
  });

  it('grep finds lines by regex or fixed string and never reads through an escaping link', async () => {
    const { outside, workspace, call } = await setup();
    await symlink(outside, path.join(workspace, 'outdir'));
    expect(await call('grep', { pattern: 'const \\w+ =' })).toBe(
      'src/a.ts:1: const a = 1;\nsrc/a.ts:2: export const b = a + 1;',
    );
    expect(await call('grep', { pattern: 'a + 1', fixed_string: true, path: 'src' })).toBe(
      'src/a.ts:2: export const b = a + 1;',
    );
    expect(await call('grep', { pattern: 'secret' })).toBe('No matches.');
    await expect(call('grep', { pattern: '(' })).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
  });
});
