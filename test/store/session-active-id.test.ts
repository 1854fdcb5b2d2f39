import { afterEach, describe, expect, it } from 'vitest';
import {
  createSessionStore,
  createSqliteDatabase,
  migrate,
  SessionEndedError,
  type SessionStore,
  type SqlDatabase,
} from '../../src/store/index.js';
import { counted, describeEachDatabase, temporarySqliteFile } from '../helpers/databases.js';

/** `reader` answers the active instance after `writer` archived it, and again after `writer` deleted the key. */
async function expectEndedInstancesSeen(reader: SessionStore, writer: SessionStore): Promise<void> {
  const first = await reader.activeId('agent:alpha:main', 'alpha');
  expect(first).toBe((await writer.getActive('agent:alpha:main'))?.id);
  expect(await reader.activeId('agent:alpha:main', 'alpha')).toBe(first);
  await writer.archive('agent:alpha:main', 'reset');
  const second = await reader.activeId('agent:alpha:main', 'alpha');
  expect(second).not.toBe(first);
  expect(second).toBe((await writer.getActive('agent:alpha:main'))?.id);
  await writer.delete('agent:alpha:main');
  const third = await reader.activeId('agent:alpha:main', 'alpha');
  expect([first, second]).not.toContain(third);
  expect((await writer.getById(third))?.status).toBe('active');
}

describeEachDatabase('SessionStore.activeId', (getDb) => {
  it('is the active instance, a new one after an archive or a delete, and checks the key', async () => {
    const sessions = createSessionStore(getDb());
    await expectEndedInstancesSeen(sessions, sessions);
    // A known key asked for by another agent is refused as ensureActive refuses it.
    await expect(sessions.activeId('agent:alpha:main', 'beta')).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
  });

  it('reads the instance again after an archive that overlapped the read', async () => {
    const sessions = createSessionStore(getDb());
    // Made by ensureActive, so no id is known yet and the lookup reads the row.
    const before = (await sessions.ensureActive('agent:alpha:ops', 'alpha')).id;
    // The lookup reads the instance; the archive ends it before the lookup has returned.
    const [looked] = await Promise.all([
      sessions.activeId('agent:alpha:ops', 'alpha'),
      sessions.archive('agent:alpha:ops', 'reset'),
    ]);
    expect(looked).toBe(before);
    const active = await sessions.activeId('agent:alpha:ops', 'alpha');
    expect(active).not.toBe(before);
    expect(active).toBe((await sessions.getActive('agent:alpha:ops'))?.id);
  });

  it('asks the database once per key on SQLite, every time where it cannot tell (Postgres)', async () => {
    const { db, statements } = counted(getDb());
    const sessions = createSessionStore(db);
    await sessions.activeId('agent:alpha:count', 'alpha');
    const afterFirst = statements();
    for (let call = 0; call < 5; call++) await sessions.activeId('agent:alpha:count', 'alpha');
    expect(statements() - afterFirst).toBe(getDb().dialect === 'sqlite' ? 0 : 5);
  });
});

describe('SessionStore.activeId with another connection to the SQLite file', () => {
  let file: ReturnType<typeof temporarySqliteFile> | undefined;
  const opened: SqlDatabase[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((db) => db.close()));
    file?.remove();
    file = undefined;
  });

  /** A migrated database file in a new directory; a second call opens another connection to the same file. */
  const openFile = async (): Promise<SqlDatabase> => {
    file ??= temporarySqliteFile('agentd-active-id-');
    const db = createSqliteDatabase({ path: file.path });
    opened.push(db);
    await migrate(db);
    return db;
  };

  it('does not reuse an id once another connection (a CLI command) has written', async () => {
    const runtimeDb = await openFile();
    const cliDb = await openFile();
    const runtime = createSessionStore(runtimeDb);
    const cli = createSessionStore(cliDb);

    await expectEndedInstancesSeen(runtime, cli);
  });

  it('keeps an id for a caller whose commit checks it, and that commit refuses an instance ended elsewhere', async () => {
    const runtimeDb = await openFile();
    const cli = createSessionStore(await openFile());
    let versionReads = 0;
    const runtime = createSessionStore(runtimeDb, {
      endsVersion: () => {
        versionReads++;
        return runtimeDb.readVersion?.();
      },
    });
    const key = 'agent:alpha:checked';
    const first = await runtime.activeId(key, 'alpha');
    const reads = versionReads;
    expect(await runtime.activeId(key, 'alpha', { confirmedByCommit: true })).toBe(first);
    expect(versionReads).toBe(reads);
    // The key is still checked, as the lookup with data_version checks it.
    await expect(runtime.activeId(key, 'beta', { confirmedByCommit: true })).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
    const run = { runId: 'run-1', startedAt: 1 };
    await cli.archive(key, 'reset');
    // Kept: only the commit that uses it can tell.
    expect(await runtime.activeId(key, 'alpha', { confirmedByCommit: true })).toBe(first);
    const ended = runtimeDb.transaction(async (tx) => {
      await tx.run(
        "INSERT INTO kv (namespace, key, value, updated_at) VALUES ('t', 'with-the-mark', 'v', 1)",
      );
      await runtime.markRunning(first, run, { messageDelta: 1, at: 2 }, tx);
    });
    await expect(ended).rejects.toBeInstanceOf(SessionEndedError);
    await expect(ended).rejects.toMatchObject({ code: 'CONFLICT', sessionId: first });
    // Rolled back: nothing of that transaction is stored, the archived row is unchanged.
    expect(await runtimeDb.get("SELECT 1 FROM kv WHERE key = 'with-the-mark'")).toBeUndefined();
    expect(await runtime.listRunning()).toEqual([]);
    expect((await runtime.getById(first))?.messageCount).toBe(0);
    // Asked without the commit's check, the store sees the other connection's write and reads the key again.
    const second = await runtime.activeId(key, 'alpha');
    expect(second).not.toBe(first);
    await runtimeDb.transaction((tx) => runtime.markRunning(second, run, { messageDelta: 1, at: 2 }, tx));
    expect(await runtime.listRunning()).toEqual([
      { runId: 'run-1', sessionKey: key, agentId: 'alpha', startedAt: 1 },
    ]);
  });

  it('answers a known key while a transaction holds the connection, without waiting for its commit', async () => {
    const db = await openFile();
    const sessions = createSessionStore(db);
    const known = await sessions.activeId('agent:alpha:busy', 'alpha');
    let finish!: () => void;
    let begun!: () => void;
    const inside = new Promise<void>((resolve) => {
      begun = resolve;
    });
    const held = db.transaction(async (tx) => {
      await tx.run("INSERT INTO kv (namespace, key, value, updated_at) VALUES ('t', 'k', 'v', 1)");
      begun();
      await new Promise<void>((resolve) => {
        finish = resolve;
      });
    });
    await inside;
    const order: string[] = [];
    const looked = sessions.activeId('agent:alpha:busy', 'alpha').then((id) => {
      order.push('looked');
      return id;
    });
    // A key not known yet is read from the table: that read waits for the transaction's commit.
    const unknown = sessions.activeId('agent:alpha:other', 'alpha').then(() => order.push('unknown'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    try {
      expect(order).toEqual(['looked']);
    } finally {
      finish();
      await held;
    }
    await unknown;
    expect(await looked).toBe(known);
    expect(order).toEqual(['looked', 'unknown']);
  });

  it('does not keep what it read inside a transaction that rolled back', async () => {
    const db = await openFile();
    const sessions = createSessionStore(db);
    let inside: string | undefined;
    await expect(
      db.transaction(async () => {
        inside = await sessions.activeId('agent:alpha:gone', 'alpha');
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await sessions.getById(inside!)).toBeUndefined();
    const after = await sessions.activeId('agent:alpha:gone', 'alpha');
    expect(after).not.toBe(inside);
    expect((await sessions.getById(after))?.status).toBe('active');
  });
});
