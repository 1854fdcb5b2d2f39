import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Runtime } from '../../src/runtime.js';
import { startRuntime, tempHome } from '../runtime/helpers.js';
import { runCli as run } from './helpers.js';

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
    expect(listed.code, `stdout: ${listed.out}, stderr: ${listed.err}`).toBe(0);
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

  it('submits, blocks, unblocks and cancels on the server, and reads ledgers from it', async () => {
    // No worker pool, so nothing runs the items while the commands change them.
    const home = tempHome();
    writeFileSync(join(home, 'agentd.yaml'), 'features:\n  workers_v1: false\n');
    const started = await startRuntime({ home });
    runtime = started.runtime;
    const remote = ['--url', started.url, '--token', started.runtime.state.token];

    const submitted = await run(['work', 'submit', 'task', 'Sort', 'the', 'nets', ...remote, '--json']);
    expect(submitted.code).toBe(0);
    const { id } = JSON.parse(submitted.out) as { id: string };
    expect((await started.runtime.work.queue.get(id))?.description).toBe('Sort the nets');

    const blocked = await run(['work', 'block', id, '--reason', 'no nets here', ...remote]);
    expect(blocked.code).toBe(0);
    expect(blocked.out).toBe(`${id} blocked: no nets here\n`);
    expect((await started.runtime.work.queue.get(id))?.state).toBe('blocked');

    await started.runtime.ledger.append(id, { entryType: 'finding', content: 'forty nets' });
    const ledger = await run(['ledger', 'show', id, '--type', 'finding', ...remote, '--json']);
    expect(ledger.code).toBe(0);
    expect(JSON.parse(ledger.out).entries).toEqual([
      expect.objectContaining({ entryType: 'finding', content: 'forty nets' }),
    ]);
    const last = await run(['ledger', 'show', id, '--last', '1', ...remote, '--json']);
    expect(JSON.parse(last.out).entries.map((entry: { content: string }) => entry.content)).toEqual([
      'forty nets',
    ]);

    const cancelled = await run(['work', 'cancel', id, ...remote]);
    expect(cancelled.code).toBe(0);
    expect((await started.runtime.work.queue.get(id))?.state).toBe('cancelled');

    // A second item to unblock.
    const other = JSON.parse(
      (await run(['work', 'submit', 'task', 'Tar the hull', ...remote, '--json'])).out,
    );
    await run(['work', 'block', other.id, '--reason', 'no tar', ...remote]);
    const unblocked = await run(['work', 'unblock', other.id, '--note', 'tar is in the shed', ...remote]);
    expect(unblocked.code).toBe(0);
    expect(unblocked.out).toBe(`${other.id} queued again\n`);
    expect((await started.runtime.work.queue.get(other.id))?.state).toBe('queued');

    // A chat session's ledger has no work item behind it.
    await started.runtime.ledger.append('session:main', { entryType: 'decision', content: 'short answers' });
    const session = await run(['ledger', 'show', 'session:main', ...remote]);
    expect(session.code, session.err).toBe(0);
    expect(session.out).toContain('short answers');

    const missing = await run(['ledger', 'show', 'work_nope', ...remote, '--json']);
    expect(JSON.parse(missing.out).error.code).toBe('NOT_FOUND');
    expect(missing.code).toBe(2);
  });

  it('work submit --idempotency-key run again answers the item made the first time, on the server and in process', async () => {
    const home = tempHome();
    writeFileSync(join(home, 'agentd.yaml'), 'features:\n  workers_v1: false\n');
    const started = await startRuntime({ home });
    runtime = started.runtime;
    const remote = ['--url', started.url, '--token', started.runtime.state.token];
    const submit = (...where: string[]) =>
      run(['work', 'submit', 'task', 'Tar', 'the', 'deck', '--idempotency-key', 'deck-1', ...where]);

    const first = await submit(...remote, '--json');
    expect(first.code, `stdout: ${first.out}, stderr: ${first.err}`).toBe(0);
    const { id } = JSON.parse(first.out) as { id: string };
    const again = await submit(...remote, '--json');
    expect(JSON.parse(again.out)).toEqual({ id, merged: false, duplicate: true });
    const inProcess = await submit('--home', home);
    expect(inProcess.out).toBe(`${id} (submitted before under this idempotency key)\n`);
    const items = await started.runtime.work.queue.list({});
    expect(items.filter((item) => item.description === 'Tar the deck')).toHaveLength(1);
  });

  it('cancel fails when the server cancelled nothing: an item that has ended, or no such item', async () => {
    // The default runtime has a worker pool, whose cancel answers the ids it cancelled and skips the rest.
    const started = await startRuntime();
    runtime = started.runtime;
    const remote = ['--url', started.url, '--token', started.runtime.state.token];
    const { id } = await started.runtime.work.queue.submit({ kind: 'task', title: 'Paint the mast' });
    await started.runtime.work.queue.cancel(id, { reason: 'no paint' });

    const again = await run(['work', 'cancel', id, ...remote]);
    expect(again.out).toBe('');
    expect(again.err).toContain(`work item ${id} is cancelled; it was not cancelled.`);
    expect(again.code).toBe(2);
    const asJson = await run(['work', 'cancel', id, ...remote, '--json']);
    expect(JSON.parse(asJson.out).error).toMatchObject({ code: 'INVALID_TRANSITION' });
    expect(asJson.code).toBe(2);
    expect((await started.runtime.work.queue.get(id))?.stateReason).toBe('no paint');

    const missing = await run(['work', 'cancel', 'work_nope', ...remote, '--json']);
    expect(JSON.parse(missing.out).error.code).toBe('NOT_FOUND');
    expect(missing.code).toBe(2);
  });

  it('takes --url from $AGENTD_URL and the token from $AGENTD_TOKEN', async () => {
    const started = await startRuntime();
    runtime = started.runtime;
    const item = await started.runtime.work.queue.submit({ kind: 'task', title: 'Mend the sail' });
    const saved = { url: process.env.AGENTD_URL, token: process.env.AGENTD_TOKEN };
    process.env.AGENTD_URL = started.url;
    process.env.AGENTD_TOKEN = started.runtime.state.token;
    try {
      // --home points at an empty directory: only the server knows this item.
      const shown = await run(['--home', '/nonexistent/agentd-home', 'work', 'show', item.id, '--json']);
      expect(shown.code).toBe(0);
      expect(JSON.parse(shown.out).item.title).toBe('Mend the sail');
      process.env.AGENTD_URL = 'ws://127.0.0.1:1';
      const unreachable = await run(['work', 'list', '--json']);
      expect(unreachable.code).toBe(3);
    } finally {
      for (const [name, value] of [
        ['AGENTD_URL', saved.url],
        ['AGENTD_TOKEN', saved.token],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});
