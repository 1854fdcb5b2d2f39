import { Command } from 'commander';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { registerWorkCommands } from '../../src/cli/commands/work.js';
import { createLedger } from '../../src/ledger/index.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { createWorkQueue, type WorkQueue } from '../../src/work/index.js';
import { openTestDatabase } from '../helpers/databases.js';

let db: SqlDatabase;
let queue: WorkQueue;

beforeEach(async () => {
  db = await openTestDatabase('sqlite');
  queue = createWorkQueue({ db });
});
afterEach(async () => {
  await db.close();
});

async function cli(...args: string[]): Promise<{ stdout: string; stderr: string; exitCode: number }> {
  let stdout = '';
  let stderr = '';
  let exitCode = 0;
  const program = new Command().exitOverride();
  registerWorkCommands(program, {
    openWork: async () => ({ queue, ledger: createLedger({ db }), close: async () => undefined }),
    io: { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) },
    setExitCode: (code) => (exitCode = code),
  });
  await program.parseAsync(['node', 'agentd', ...args]);
  return { stdout, stderr, exitCode };
}

describe('agentd work and ledger commands', () => {
  it('submits, lists, shows and cancels, with --json everywhere', async () => {
    const submitted = JSON.parse(
      (
        await cli(
          'work',
          'submit',
          'task',
          'write',
          'the',
          'report',
          '--priority',
          '3',
          '--params',
          '{"n":1}',
          '--json',
        )
      ).stdout,
    );
    expect(submitted).toMatchObject({ merged: false });
    const merged = await cli('work', 'submit', 'task', 'again', '--dedup-key', 'k');
    expect(merged.stdout).toMatch(/^work_/);
    expect((await cli('work', 'submit', 'task', 'again', '--dedup-key', 'k')).stdout).toContain(
      'merged into',
    );

    const listed = JSON.parse((await cli('work', 'list', '--state', 'queued', '--json')).stdout);
    expect(listed.items).toHaveLength(2);
    const table = (await cli('work', 'list')).stdout;
    expect(table).toContain('write the report');
    expect(table.split('\n')[0]).toMatch(/^ID\s+STATE/);

    const ledger = createLedger({ db });
    await ledger.append(submitted.id, { entryType: 'finding', content: 'sales grew 4%' });
    const shown = JSON.parse((await cli('work', 'show', submitted.id, '--json')).stdout);
    expect(shown.item).toMatchObject({ id: submitted.id, priority: 3, params: { n: 1 } });
    expect(shown.ledger).toHaveLength(1);
    expect((await cli('work', 'show', submitted.id)).stdout).toContain('[1] finding: sales grew 4%');
    expect((await cli('ledger', 'show', submitted.id)).stdout).toBe('[1] finding: sales grew 4%\n');
    expect(
      JSON.parse((await cli('ledger', 'show', submitted.id, '--type', 'plan', '--json')).stdout).entries,
    ).toEqual([]);

    expect((await cli('work', 'cancel', submitted.id)).stdout).toContain('cancelled');
    expect((await queue.get(submitted.id))?.state).toBe('cancelled');
  });

  it('reports bad input as a usage error with a stable code', async () => {
    const missing = await cli('work', 'show', 'nope', '--json');
    expect(JSON.parse(missing.stdout).error.code).toBe('NOT_FOUND');
    expect(missing.exitCode).toBe(2);
    const badParams = await cli('work', 'submit', 'task', 'x', '--params', '[1]');
    expect(badParams.stderr).toContain('INVALID_REQUEST');
    expect(badParams.exitCode).toBe(2);
    expect((await cli('work', 'list', '--state', 'sleeping')).stderr).toContain('unknown state sleeping');
    expect((await cli('ledger', 'show', 'x', '--type', 'gossip')).exitCode).toBe(2);
    const cancelTwice = await cli('work', 'submit', 'task', 'y', '--json');
    const { id } = JSON.parse(cancelTwice.stdout);
    await cli('work', 'cancel', id);
    expect((await cli('work', 'cancel', id, '--json')).stdout).toContain('INVALID_TRANSITION');
  });
});
