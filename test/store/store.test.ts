import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { type BusEvent, createBus } from '../../src/bus/index.js';
import {
  createMemoryStore,
  createSqliteDatabase,
  createStore,
  currentSchemaVersion,
  redactConnectionString,
  type SqliteDatabase,
  type Store,
} from '../../src/store/index.js';
import { createRecordingLogger } from '../../src/util/index.js';
import { postgresTestBackend } from '../helpers/databases.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const tempDir = () => mkdtempSync(join(tmpdir(), 'agentd-store-'));

const opened: Store[] = [];
const track = (store: Store) => {
  opened.push(store);
  return store;
};
afterEach(async () => {
  await Promise.all(opened.splice(0).map((store) => store.close()));
});

describe('createStore on SQLite', () => {
  it('opens <stateDir>/agentd.db in WAL mode and keeps data across reopen', async () => {
    const stateDir = join(tempDir(), 'nested', 'state');
    const first = await createStore({ stateDir });
    expect(first.mode).toBe('sqlite');
    expect(first.degradedReason).toBeUndefined();
    expect(first.db.location).toBe(join(stateDir, 'agentd.db'));
    expect(first.db.persistent).toBe(true);
    expect((first.db as SqliteDatabase).driver.pragma('journal_mode', { simple: true })).toBe('wal');
    expect((first.db as SqliteDatabase).driver.pragma('synchronous', { simple: true })).toBe(1);
    expect((first.db as SqliteDatabase).driver.pragma('foreign_keys', { simple: true })).toBe(1);
    const session = await first.sessions.ensureActive('agent:main:main', 'main');
    await first.kv.set('ns', 'k', 'v');
    await first.events.append({ type: 'x:y', at: 1, data: { ok: true } });
    await first.close();

    const second = track(await createStore({ stateDir }));
    expect(await second.sessions.getActive('agent:main:main')).toEqual(session);
    expect(await second.kv.get('ns', 'k')).toBe('v');
    expect(await second.events.list()).toMatchObject([{ type: 'x:y', data: { ok: true } }]);
  });

  it('falls back to RAM, loudly, when the state dir cannot be created', async () => {
    const parentFile = join(tempDir(), 'a-file');
    writeFileSync(parentFile, 'not a directory');
    const bus = createBus();
    const published: BusEvent[] = [];
    bus.subscribe({}, (event) => published.push(event));
    const logger = createRecordingLogger();
    const store = track(await createStore({ stateDir: join(parentFile, 'state'), bus, logger }));

    expect(store.mode).toBe('memory');
    expect(store.db.persistent).toBe(false);
    expect(store.degradedReason).toContain(join(parentFile, 'state', 'agentd.db'));
    expect(published.map((event) => event.type)).toEqual(['store:degraded', 'system:error']);
    expect(published[0]!.data).toEqual({
      reason: store.degradedReason,
      path: join(parentFile, 'state', 'agentd.db'),
    });
    expect(published[1]!.data).toMatchObject({ code: 'STORE_UNAVAILABLE', component: 'store' });
    expect(
      logger.records.some((record) => record.level === 'error' && record.message?.includes('RAM-only')),
    ).toBe(true);
    // Degraded, but working.
    const session = await store.sessions.ensureActive('agent:main:main', 'main');
    expect(await store.sessions.getById(session.id)).toEqual(session);
  });

  it('falls back to RAM when the database file is not a database, and leaves the file alone', async () => {
    const stateDir = tempDir();
    const garbage = Buffer.from(Array.from({ length: 8_192 }, (_, index) => (index * 37 + 11) % 256));
    writeFileSync(join(stateDir, 'agentd.db'), garbage);
    const bus = createBus();
    const degraded: BusEvent[] = [];
    bus.on('store:degraded', (event) => degraded.push(event));
    const store = track(await createStore({ stateDir, bus }));
    expect(store.mode).toBe('memory');
    expect(store.degradedReason).toMatch(/not a database/);
    expect(degraded).toHaveLength(1);
    expect(readFileSync(join(stateDir, 'agentd.db'))).toEqual(garbage);
    await store.kv.set('ns', 'k', 'v');
    expect(await store.kv.get('ns', 'k')).toBe('v');
  });

  it('waits for another process that holds the write lock (its migrations) instead of falling back to RAM', async () => {
    const stateDir = tempDir();
    const holder = new Database(join(stateDir, 'agentd.db'));
    holder.pragma('journal_mode = WAL');
    holder.exec('BEGIN IMMEDIATE');
    setTimeout(() => {
      holder.exec('COMMIT');
      holder.close();
    }, 700);
    const store = track(await createStore({ stateDir, sqliteBusyTimeoutMs: 100, openWaitMs: 10_000 }));
    expect(store.mode).toBe('sqlite');
    await store.kv.set('ns', 'k', 'kept');
  });

  it('fails with STORE_UNAVAILABLE, never RAM-only, when the write lock stays held past openWaitMs', async () => {
    const stateDir = tempDir();
    const holder = new Database(join(stateDir, 'agentd.db'));
    holder.pragma('journal_mode = WAL');
    holder.exec('BEGIN IMMEDIATE');
    try {
      await expect(
        createStore({ stateDir, sqliteBusyTimeoutMs: 100, openWaitMs: 400 }).then(
          (store) => track(store).mode,
        ),
      ).rejects.toMatchObject({
        code: 'STORE_UNAVAILABLE',
        retryable: true,
        details: { waitedMs: expect.any(Number) },
      });
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
  });

  it('refuses a database file written by newer code instead of falling back', async () => {
    const stateDir = tempDir();
    const first = await createStore({ stateDir });
    await first.db.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', [
      currentSchemaVersion('sqlite') + 1,
      'future',
      1,
    ]);
    await first.close();
    await expect(createStore({ stateDir })).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW' });
  });

  it('creates an in-memory store for tests', async () => {
    const store = track(await createMemoryStore());
    expect(store.mode).toBe('memory');
    expect(store.degradedReason).toBeUndefined();
    expect(store.db.location).toBe(':memory:');
    expect((await store.sessions.ensureActive('agent:a:b', 'a')).status).toBe('active');
  });
});

describe('createStore on Postgres', () => {
  it('fails with STORE_UNAVAILABLE, without the password, when the server does not answer', async () => {
    const error = await createStore({
      stateDir: tempDir(),
      databaseUrl: 'postgres://agentd:planted-secret-123@127.0.0.1:1/agentd',
    }).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE', fault: 'system', retryable: true });
    expect((error as Error).message).toContain('127.0.0.1:1');
    expect((error as Error).message).not.toContain('planted-secret-123');
  });

  it('rejects a DATABASE_URL that is not a postgres URL', async () => {
    await expect(createStore({ stateDir: tempDir(), databaseUrl: 'mysql://x@y/z' })).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
    });
  });

  it('opens and migrates a Postgres server when one is reachable', async (context) => {
    const backend = await postgresTestBackend();
    if (backend.kind !== 'server') {
      context.skip('no Postgres server reachable; the Postgres paths run on PGlite elsewhere');
      return;
    }
    const schema = `agentd_t_${Date.now().toString(36)}_${process.pid}_store`;
    const admin = new pg.Client({ connectionString: backend.url });
    await admin.connect();
    try {
      await admin.query(`CREATE SCHEMA ${schema}`);
      const store = await createStore({ stateDir: tempDir(), databaseUrl: backend.url, schema });
      try {
        expect(store.mode).toBe('postgres');
        expect(store.db.location).toContain(schema);
        const session = await store.sessions.ensureActive('agent:main:main', 'main');
        expect(await store.sessions.getById(session.id)).toEqual(session);
      } finally {
        await store.close();
      }
    } finally {
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
    }
  });
});

describe('durability', () => {
  it('keeps committed writes, and only those, when the process is killed', async () => {
    const path = join(tempDir(), 'crash.db');
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(repoRoot, 'test/store/fixtures/commit-then-die.ts'), path],
      {
        cwd: repoRoot,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.on('exit', (exitCode, exitSignal) => resolve([exitCode, exitSignal])),
    );
    expect({ code, signal, stdout, stderr }).toMatchObject({
      code: null,
      signal: 'SIGKILL',
      stdout: 'committed\n',
    });

    const db = createSqliteDatabase({ path });
    try {
      expect(await db.all('SELECT v FROM survived')).toEqual([{ v: 'committed' }]);
    } finally {
      await db.close();
    }
  });
});

describe('redactConnectionString', () => {
  it('removes the password from the URL and its query', () => {
    expect(
      redactConnectionString('postgres://user:secret@db.example:5432/app?password=other&sslmode=require'),
    ).toBe('postgres://user@db.example:5432/app?sslmode=require');
    expect(redactConnectionString('not a url with secret')).not.toContain('secret');
  });
});
