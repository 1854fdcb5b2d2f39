import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import type { CliIo } from '../../src/cli/output.js';
import type { Runtime } from '../../src/runtime.js';
import { startRuntime } from '../runtime/helpers.js';

async function run(args: string[]) {
  let out = '';
  let err = '';
  const io: CliIo = {
    stdout: (text) => {
      out += text;
    },
    stderr: (text) => {
      err += text;
    },
  };
  const code = await main(['node', 'agentd', ...args], io);
  return { code, out, err };
}

let runtime: Runtime | undefined;
afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
});

describe('agentd work list|show --url', () => {
  it('reads a running server the way it reads the database', async () => {
    const started = await startRuntime();
    runtime = started.runtime;
    const remote = ['--url', started.url, '--token', started.runtime.state.token];
    const parent = await started.runtime.work.queue.submit({ kind: 'task', title: 'Count the boats' });
    const child = await started.runtime.work.queue.submit({
      kind: 'task',
      title: 'Count the red ones',
      parentId: parent.id,
    });
    await started.runtime.ledger.append(parent.id, { entryType: 'finding', content: 'twelve boats' });

    const listed = await run(['work', 'list', ...remote, '--json']);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.out).items.map((item: { title: string }) => item.title)).toEqual([
      'Count the red ones',
      'Count the boats',
    ]);
    const table = await run([
      'work',
      'list',
      ...remote,
      '--state',
      'queued,claimed,running,completed,failed,dead',
    ]);
    expect(table.out.split('\n')[0]).toMatch(/^ID\s+STATE\s+KIND/);
    expect(table.out).toContain('Count the boats');

    const shown = await run(['work', 'show', parent.id, ...remote, '--json']);
    const body = JSON.parse(shown.out);
    expect(body.item).toMatchObject({ id: parent.id, title: 'Count the boats' });
    expect(body.children.map((item: { id: string }) => item.id)).toEqual([child.id]);
    expect(body.ledger).toEqual([expect.objectContaining({ entryType: 'finding', content: 'twelve boats' })]);

    const missing = await run(['work', 'show', 'work_nope', ...remote, '--json']);
    expect(JSON.parse(missing.out).error.code).toBe('NOT_FOUND');
    expect(missing.code).toBe(2);
  });
});
