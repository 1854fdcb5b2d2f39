import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { type BusEvent, createBus } from '../../src/bus/index.js';
import { createLedger, formatLedgerEntries } from '../../src/ledger/index.js';
import { createSqliteDatabase, migrate } from '../../src/store/index.js';
import { createLedgerTools } from '../../src/tools/index.js';
import { AgentdError, createManualClock } from '../../src/util/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createToolContext } from '../tools/helpers.js';

describeEachDatabase('work ledger', (getDb) => {
  it('assigns gapless seq per work item under concurrent appends', async () => {
    const ledger = createLedger({ db: getDb() });
    const appends = [];
    for (let index = 0; index < 40; index++) {
      appends.push(
        ledger.append(index % 2 ? 'work_a' : 'work_b', { entryType: 'note', content: `entry ${index}` }),
      );
    }
    const entries = await Promise.all(appends);
    for (const workItemId of ['work_a', 'work_b']) {
      const seqs = entries.filter((entry) => entry.workItemId === workItemId).map((entry) => entry.seq);
      expect([...seqs].sort((left, right) => left - right)).toEqual(
        Array.from({ length: 20 }, (_, index) => index + 1),
      );
      const stored = await ledger.read(workItemId);
      expect(stored.map((entry) => entry.seq)).toEqual(Array.from({ length: 20 }, (_, index) => index + 1));
    }
  });

  it('concurrent appenders through separate ledger instances still get distinct, gapless seqs', async () => {
    const db = getDb();
    const ledgers = [createLedger({ db }), createLedger({ db }), createLedger({ db })];
    await Promise.all(
      Array.from({ length: 30 }, (_, index) =>
        ledgers[index % 3]!.append('work_x', { entryType: 'finding', content: `f${index}` }),
      ),
    );
    expect((await ledgers[0]!.read('work_x')).map((entry) => entry.seq)).toEqual(
      Array.from({ length: 30 }, (_, index) => index + 1),
    );
  });

  it('reads by type and last N in seq order, formats like ledger_read, and publishes appends', async () => {
    const clock = createManualClock(1_000);
    const bus = createBus();
    const events: Array<BusEvent<'ledger:appended'>> = [];
    bus.on('ledger:appended', (event) => events.push(event));
    const ledger = createLedger({ db: getDb(), clock, bus });
    for (const [entryType, content] of [
      ['plan', 'read the code'],
      ['finding', 'uses sqlite'],
      ['step', 'read src/'],
      ['finding', 'has tests'],
      ['decision', 'add postgres'],
    ] as const) {
      await ledger.append('w', { entryType, content });
      clock.advance(10);
    }
    expect(formatLedgerEntries(await ledger.read('w', { entryType: 'finding' }))).toBe(
      '[2] finding: uses sqlite\n[4] finding: has tests',
    );
    expect((await ledger.read('w', { lastN: 2 })).map((entry) => entry.seq)).toEqual([4, 5]);
    expect(await ledger.read('w', { entryType: 'finding', lastN: 1 })).toEqual([
      { workItemId: 'w', seq: 4, entryType: 'finding', content: 'has tests', createdAt: 1_030 },
    ]);
    expect(await ledger.read('other')).toEqual([]);
    expect(events.map((event) => [event.workItemId, event.data.seq, event.data.entryType])).toEqual([
      ['w', 1, 'plan'],
      ['w', 2, 'finding'],
      ['w', 3, 'step'],
      ['w', 4, 'finding'],
      ['w', 5, 'decision'],
    ]);
  });

  it('lists recent findings across work items, newest first', async () => {
    const clock = createManualClock(0);
    const ledger = createLedger({ db: getDb(), clock });
    await ledger.append('a', { entryType: 'finding', content: 'old' });
    clock.set(5_000);
    await ledger.append('b', { entryType: 'finding', content: 'new b' });
    await ledger.append('b', { entryType: 'note', content: 'not a finding' });
    clock.set(6_000);
    await ledger.append('a', { entryType: 'finding', content: 'new a' });
    const recent = await ledger.listRecentFindings({ sinceMs: 1_000, limit: 10 });
    expect(recent.map((entry) => entry.content)).toEqual(['new a', 'new b']);
    expect(await ledger.listRecentFindings({ sinceMs: 0, limit: 1 })).toHaveLength(1);
  });

  it('refuses unknown types, empty and oversized content, and keeps rows append-only', async () => {
    const db = getDb();
    const ledger = createLedger({ db, maxContentChars: 10 });
    const codeOf = (promise: Promise<unknown>) =>
      promise.then(
        () => 'ok',
        (error: unknown) => (AgentdError.isInstance(error) ? error.code : String(error)),
      );
    expect(await codeOf(ledger.append('w', { entryType: 'thought' as 'note', content: 'x' }))).toBe(
      'INVALID_REQUEST',
    );
    expect(await codeOf(ledger.append('w', { entryType: 'note', content: '   ' }))).toBe('INVALID_REQUEST');
    expect(await codeOf(ledger.append('w', { entryType: 'note', content: 'x'.repeat(11) }))).toBe(
      'PAYLOAD_TOO_LARGE',
    );
    await ledger.append('w', { entryType: 'note', content: 'kept' });
    await expect(db.run("UPDATE work_ledger SET content = 'changed'")).rejects.toThrow(/append-only/);
    await expect(db.run('DELETE FROM work_ledger')).rejects.toThrow(/append-only/);
    expect((await ledger.read('w')).map((entry) => [entry.seq, entry.content])).toEqual([[1, 'kept']]);
  });

  it("an append inside a caller's transaction commits and rolls back with it", async () => {
    const db = getDb();
    const ledger = createLedger({ db });
    await ledger.append('w', { entryType: 'plan', content: 'first' });
    await expect(
      db.transaction(async () => {
        await ledger.append('w', { entryType: 'note', content: 'rolled back' });
        throw new Error('the caller fails');
      }),
    ).rejects.toThrow('the caller fails');
    await db.transaction(async () => {
      await ledger.append('w', { entryType: 'note', content: 'committed' });
    });
    expect((await ledger.read('w')).map((entry) => [entry.seq, entry.content])).toEqual([
      [1, 'first'],
      [2, 'committed'],
    ]);
  });

  it('ledger_append / ledger_read tools act on the run work item and report the entry in metadata', async () => {
    const ledger = createLedger({ db: getDb() });
    const [append, read] = createLedgerTools(ledger);
    const context = createToolContext('/tmp', { workItemId: 'work_7' });
    const result = await append!.execute(
      append!.input.parse({ entry_type: 'step', content: 'parsed the config' }),
      context,
    );
    expect(result).toEqual({
      content: 'Recorded step #1.',
      metadata: {
        ledgerEntry: { workItemId: 'work_7', seq: 1, entryType: 'step', content: 'parsed the config' },
      },
    });
    await append!.execute({ entry_type: 'finding', content: 'port is 8080' }, context);
    expect(await read!.execute(read!.input.parse({ last_n: 5 }), context)).toBe(
      '[1] step: parsed the config\n[2] finding: port is 8080',
    );
    expect(await read!.execute(read!.input.parse({ entry_type: 'error' }), context)).toBe(
      'The ledger is empty.',
    );
    expect(() => append!.input.parse({ entry_type: 'thought', content: 'x' })).toThrow();
    expect(
      await append!.execute(
        { entry_type: 'note', content: 'x' },
        createToolContext('/tmp', { workItemId: undefined }),
      ),
    ).toMatchObject({
      isError: true,
    });
  });
});

const root = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

// One append on SQLite is one autocommitted statement that reads MAX(seq) under the write lock: processes
// appending to the same work item at once must still get distinct, gapless seqs, and what a process was told
// is written must be on disk for the others.
describe('work ledger [sqlite file, several processes]', () => {
  it('gives processes appending to one work item at once distinct, gapless seqs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentd-ledger-'));
    const path = join(dir, 'ledger.db');
    const setup = createSqliteDatabase({ path });
    await migrate(setup);
    await setup.close();
    const appender = `
      const { createSqliteDatabase } = await import(${JSON.stringify(join(root, 'src/store/index.ts'))});
      const { createLedger } = await import(${JSON.stringify(join(root, 'src/ledger/index.ts'))});
      const db = createSqliteDatabase({ path: ${JSON.stringify(path)} });
      const ledger = createLedger({ db });
      // All processes start appending at the same moment, so their appends interleave.
      await new Promise((resolve) => setTimeout(resolve, Number(process.argv[2]) - Date.now()));
      const seqs = [];
      for (let index = 0; index < 200; index++)
        seqs.push((await ledger.append('shared', { entryType: 'note', content: process.argv[1] + index })).seq);
      await db.close();
      console.log(JSON.stringify(seqs));`;
    const startAt = String(Date.now() + 8_000);
    try {
      const outputs = await Promise.all(
        ['a', 'b', 'c'].map((name) =>
          run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', appender, name, startAt], {
            cwd: root,
          }),
        ),
      );
      const perProcess = outputs.map(({ stdout }) => JSON.parse(stdout) as number[]);
      for (const seqs of perProcess) expect(seqs).toEqual([...seqs].sort((left, right) => left - right));
      expect(perProcess.flat().sort((left, right) => left - right)).toEqual(
        Array.from({ length: 600 }, (_, index) => index + 1),
      );
      const reader = createSqliteDatabase({ path });
      try {
        const entries = await createLedger({ db: reader }).read('shared');
        expect(entries.map((entry) => entry.seq)).toEqual(
          Array.from({ length: 600 }, (_, index) => index + 1),
        );
        expect(new Set(entries.map((entry) => entry.content)).size).toBe(600);
      } finally {
        await reader.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
