import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createStore, type Store } from '../../src/store/index.js';
import { postgresTestBackend } from '../helpers/databases.js';

/**
 * On Postgres a store keeps the ids of active sessions while its LISTEN connection hears sessions end
 * (migration 0033): two stores on one schema stand for two agentd processes sharing a database.
 */
describe('SessionStore.activeId on Postgres, with the ends announced', () => {
  let url: string | undefined;
  let admin: pg.Client | undefined;
  let schema = '';
  /** The listening connections of this test's stores are found by this application name. */
  let applicationName = '';
  const opened: Store[] = [];

  beforeEach(async (context) => {
    const backend = await postgresTestBackend();
    if (backend.kind !== 'server') {
      context.skip('no Postgres server reachable: LISTEN needs connections of its own');
      return;
    }
    schema = `agentd_t_${Date.now().toString(36)}_${process.pid}_ends`;
    applicationName = `${schema}_app`;
    const withName = new URL(backend.url);
    withName.searchParams.set('application_name', applicationName);
    url = withName.toString();
    admin = new pg.Client({ connectionString: backend.url });
    await admin.connect();
    await admin.query(`CREATE SCHEMA ${schema}`);
  });

  afterEach(async () => {
    await Promise.all(opened.splice(0).map((store) => store.close()));
    await admin?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin?.end();
    admin = undefined;
  });

  /** A store on the test's schema, once its LISTEN is on (its first read of a version says so). */
  const open = async (inSchema = schema): Promise<{ store: Store; statements: () => number }> => {
    const store = await createStore({
      stateDir: mkdtempSync(join(tmpdir(), 'agentd-ends-')),
      databaseUrl: url!,
      schema: inSchema,
      // Long enough for the test to act while the connection is down.
      listenReconnectDelayMs: 5_000,
    });
    opened.push(store);
    const get = vi.spyOn(store.db, 'get');
    const statements = () => get.mock.calls.length;
    await store.sessions.activeId('agent:alpha:warm', 'alpha');
    await vi.waitFor(
      async () => {
        const before = statements();
        await store.sessions.activeId('agent:alpha:warm', 'alpha');
        expect(statements()).toBe(before);
      },
      { timeout: 10_000, interval: 50 },
    );
    return { store, statements };
  };

  const listeners = async () =>
    (
      await admin!.query<{ pid: number }>(
        "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query = 'LISTEN agentd_session_ends'",
        [applicationName],
      )
    ).rows.map((row) => row.pid);

  it('reads a key once, and again after another process archived or deleted it', async () => {
    const { store: runtime, statements } = await open();
    const { store: other } = await open();
    const first = await runtime.sessions.activeId('agent:alpha:main', 'alpha');
    const afterFirst = statements();
    for (let call = 0; call < 5; call++)
      expect(await runtime.sessions.activeId('agent:alpha:main', 'alpha')).toBe(first);
    expect(statements()).toBe(afterFirst);

    await other.sessions.archive('agent:alpha:main', 'reset');
    const second = (await other.sessions.ensureActive('agent:alpha:main', 'alpha')).id;
    expect(second).not.toBe(first);
    await vi.waitFor(
      async () => expect(await runtime.sessions.activeId('agent:alpha:main', 'alpha')).toBe(second),
      { timeout: 10_000, interval: 20 },
    );
    // Kept again once read.
    const afterSecond = statements();
    expect(await runtime.sessions.activeId('agent:alpha:main', 'alpha')).toBe(second);
    expect(statements()).toBe(afterSecond);

    await other.sessions.delete('agent:alpha:main');
    await vi.waitFor(
      async () => {
        const third = await runtime.sessions.activeId('agent:alpha:main', 'alpha');
        expect([first, second]).not.toContain(third);
        expect((await other.sessions.getById(third))?.status).toBe('active');
      },
      { timeout: 10_000, interval: 20 },
    );
  });

  it('reads every time while its LISTEN connection is down, and keeps ids again once it is back', async () => {
    const { store: runtime, statements } = await open();
    const { store: other } = await open();
    const first = await runtime.sessions.activeId('agent:alpha:main', 'alpha');
    const pids = await listeners();
    expect(pids).toHaveLength(2);
    // Both stores' listeners go; each reconnects after its delay (5 s).
    for (const pid of pids) await admin!.query('SELECT pg_terminate_backend($1)', [pid]);
    // Once the store saw its connection end, every call reads the row (within the reconnect delay)...
    await vi.waitFor(
      async () => {
        const before = statements();
        await runtime.sessions.activeId('agent:alpha:main', 'alpha');
        expect(statements()).toBe(before + 1);
      },
      { timeout: 2_500, interval: 20 },
    );
    // ...so an archive it cannot hear is seen at once.
    await other.sessions.archive('agent:alpha:main', 'reset');
    const second = await runtime.sessions.activeId('agent:alpha:main', 'alpha');
    expect(second).not.toBe(first);
    expect(second).toBe((await other.sessions.getActive('agent:alpha:main'))?.id);
    // Listening again: the ids are kept.
    await vi.waitFor(
      async () => {
        const before = statements();
        expect(await runtime.sessions.activeId('agent:alpha:main', 'alpha')).toBe(second);
        expect(statements()).toBe(before);
      },
      { timeout: 20_000, interval: 100 },
    );
    expect(await listeners()).toHaveLength(2);
  });

  it('does not keep what it read inside a transaction that rolled back', async () => {
    const { store } = await open();
    let inside: string | undefined;
    await expect(
      store.db.transaction(async () => {
        inside = await store.sessions.activeId('agent:alpha:gone', 'alpha');
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await store.sessions.getById(inside!)).toBeUndefined();
    const after = await store.sessions.activeId('agent:alpha:gone', 'alpha');
    expect(after).not.toBe(inside);
    expect((await store.sessions.getById(after))?.status).toBe('active');
  });

  it("announces only a session's end: a turn's own updates and an archived row's delete send nothing", async () => {
    const listener = new pg.Client({ connectionString: url! });
    await listener.connect();
    // Other test files' stores, each on a schema of its own, announce on the same channel at the same time.
    const heard: string[] = [];
    listener.on('notification', (message) => {
      if (message.payload === schema) heard.push(message.channel);
    });
    await listener.query('LISTEN agentd_session_ends');
    try {
      const { store } = await open();
      const session = await store.sessions.ensureActive('agent:alpha:quiet', 'alpha');
      await store.sessions.touch(session.id, { messageDelta: 2 });
      await store.sessions.markRunning(session.id, { runId: 'r1', startedAt: 1 });
      await store.sessions.markEnded('agent:alpha:quiet', 'r1');
      await store.sessions.patch(session.id, { title: 'quiet' });
      await store.sessions.archive('agent:alpha:quiet', 'reset');
      // Deleting the key now removes only the archived row.
      await store.sessions.delete('agent:alpha:quiet');
      // A round trip on the listening connection: whatever was sent before it has arrived.
      await listener.query('SELECT 1');
      expect(heard).toEqual(['agentd_session_ends']);
    } finally {
      await listener.end();
    }
  });
  it("ignores the ends announced by another schema's stores in the same database", async () => {
    const otherSchema = `${schema}_b`;
    await admin!.query(`CREATE SCHEMA ${otherSchema}`);
    const listener = new pg.Client({ connectionString: url! });
    await listener.connect();
    const payloads: string[] = [];
    listener.on('notification', (message) => payloads.push(message.payload ?? ''));
    await listener.query('LISTEN agentd_session_ends');
    try {
      const { store: runtime, statements } = await open();
      const { store: elsewhere } = await open(otherSchema);
      const kept = await runtime.sessions.activeId('agent:alpha:main', 'alpha');
      await elsewhere.sessions.ensureActive('agent:alpha:main', 'alpha');
      await elsewhere.sessions.archive('agent:alpha:main', 'reset');
      await vi.waitFor(() => expect(payloads).toContain(otherSchema), { timeout: 5_000, interval: 10 });
      // The runtime's listener heard the same announcement about when this one did: for the next 300 ms its
      // kept id still answers, without a read (before migration 0036 every store counted every end).
      const afterEnd = statements();
      const until = Date.now() + 300;
      while (Date.now() < until) {
        expect(await runtime.sessions.activeId('agent:alpha:main', 'alpha')).toBe(kept);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(statements()).toBe(afterEnd);
    } finally {
      await listener.end();
      await Promise.all(opened.splice(0).map((store) => store.close()));
      await admin!.query(`DROP SCHEMA IF EXISTS ${otherSchema} CASCADE`);
    }
  });
});
