import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import type { GatewayClient } from '../../src/cli/gateway-client.js';
import { createMemoryService } from '../../src/memory/index.js';
import type { Runtime } from '../../src/runtime.js';
import { createKvStore, type SqliteDatabase } from '../../src/store/index.js';
import { createScriptedModel } from '../../src/testing.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';
import { sessionRef } from '../memory/memory-fixtures.js';
import { collectRun, startRuntime, tempHome } from '../runtime/helpers.js';

describeEachDatabase('memory after a transient write failure', (getDb) => {
  it('queues writes while the disk is full and writes them through, in order, when it is back', async () => {
    const faulty = createFaultyDatabase(getDb());
    const bus = createBus();
    const seen: string[] = [];
    bus.subscribe({ types: ['memory:degraded', 'memory:recovered', 'system:error'] }, (event) =>
      seen.push(event.type),
    );
    const memory = createMemoryService({
      db: faulty,
      bus,
      config: { writeRetryMs: 5, maxWriteRetryMs: 20 },
    });
    const kv = createKvStore(getDb());
    const ref = sessionRef();
    await memory.append(ref, { role: 'user', content: 'stored 1' });
    await memory.append(ref, { role: 'assistant', content: 'stored 2' });

    faulty.failWrites();
    const recovered = new Promise<{ writtenThrough: number }>((resolve) =>
      bus.on('memory:recovered', (event) => resolve(event.data)),
    );
    for (let index = 0; index < 4; index++) {
      // `also` stands for the chat inbox: it must commit with its entry, not before and not without it.
      await memory.append(ref, { role: 'user', content: `pending ${index}` }, (tx) =>
        kv.set('marks', `m${index}`, 'x', tx),
      );
    }
    expect(faulty.refused).toBeGreaterThan(0);
    expect(memory.status()).toMatchObject({ degraded: true, pendingWrites: 4 });
    expect(seen).toEqual(['memory:degraded', 'system:error']);
    // History shows what is stored and what waits, in id order.
    const expected = ['stored 1', 'stored 2', 'pending 0', 'pending 1', 'pending 2', 'pending 3'];
    expect((await memory.history(ref.sessionKey)).map((entry) => entry.content)).toEqual(expected);
    expect(await kv.list('marks')).toEqual([]);

    faulty.heal();
    expect(await recovered).toMatchObject({ writtenThrough: 4 });
    expect(memory.status()).toMatchObject({ degraded: false, degradedReason: undefined, pendingWrites: 0 });

    // What a restart sees: a fresh service on the same database.
    const restarted = createMemoryService({ db: getDb(), bus: createBus() });
    expect((await restarted.history(ref.sessionKey)).map((entry) => entry.content)).toEqual(expected);
    expect((await kv.list('marks')).map((entry) => entry.key)).toEqual(['m0', 'm1', 'm2', 'm3']);
    // Ids go on after the written-through ones.
    expect((await memory.append(ref, { role: 'user', content: 'after' })).memoryId).toBe(7);
    expect((await restarted.load({ ...ref })).length).toBeGreaterThanOrEqual(6);
  });

  it('leaves degraded mode after a failed read once the database answers again', async () => {
    const faulty = createFaultyDatabase(getDb());
    const bus = createBus();
    const memory = createMemoryService({ db: faulty, bus, config: { writeRetryMs: 5, maxWriteRetryMs: 20 } });
    const recovered = new Promise<void>((resolve) => bus.on('memory:recovered', () => resolve()));
    memory.reportWriteFailure(new Error('database or disk is full'));
    expect(memory.status().degraded).toBe(true);
    await recovered;
    expect(memory.status().degraded).toBe(false);
  });
});

describe('agentd on a disk that fills up and frees again', () => {
  let runtime: Runtime | undefined;
  let client: GatewayClient | undefined;
  afterEach(async () => {
    await client?.close();
    await runtime?.close();
    client = undefined;
    runtime = undefined;
  });

  it('reports degraded, refuses new messages retryably, writes acknowledged ones through, loses nothing', async () => {
    const home = tempHome('agentd-diskfull-');
    writeFileSync(join(home, 'agentd.yaml'), 'memory:\n  writeRetryMs: 10\n  maxWriteRetryMs: 40\n');
    let driver: SqliteDatabase['driver'] | undefined;
    const bigReply = `reply while full ${'y'.repeat(8000)}`;
    // SQLite's own page limit produces a genuine SQLITE_FULL from the driver; filler rows use up the free
    // pages, and the reply written while full is larger than a page, so it needs new ones.
    const fillDisk = () => {
      driver!.pragma(`max_page_count = ${driver!.pragma('page_count', { simple: true })}`);
      const filler = driver!.prepare(
        "INSERT INTO kv (namespace, key, value, updated_at) VALUES ('filler', ?, ?, 0)",
      );
      try {
        for (let index = 0; index < 10_000; index++) filler.run(`f${index}`, 'x'.repeat(2000));
      } catch (error) {
        expect((error as { code: string }).code).toBe('SQLITE_FULL');
      }
    };
    const freeDisk = () => driver!.pragma('max_page_count = 1073741823');
    const model = createScriptedModel({
      steps: [
        { text: 'reply 1' },
        () => {
          fillDisk();
          return { text: bigReply };
        },
        ...Array.from({ length: 5 }, (_, index) => ({ text: `reply after ${index}` })),
      ],
    });
    const started = await startRuntime({ home, model });
    runtime = started.runtime;
    driver = (runtime.store.db as SqliteDatabase).driver;
    client = await started.connect();
    const systemErrors: Array<{ code: string }> = [];
    client.onEvent((event, payload) => {
      if (event === 'system.error') systemErrors.push(payload);
    });
    // Status for anyone on /health, details for an authenticated client.
    const health = async () => ({
      status: (
        (await (await fetch(`${started.url.replace(/^ws/, 'http')}/health`)).json()) as { status: string }
      ).status,
      store: (await client!.call<{ store: { writable: boolean; persistent: boolean } }>('health', {})).store,
    });

    const send = async (text: string, runId: string) => {
      const done = collectRun(client!, runId);
      await client!.call('chat.send', {
        sessionKey: 'agent:main:main',
        message: text,
        idempotencyKey: runId,
      });
      return (await done).at(-1)!.payload;
    };
    expect((await send('message 1', 'run-1')).state).toBe('final');
    expect(await health()).toMatchObject({ status: 'ok', store: { writable: true } });

    // Acknowledged before the disk filled; its reply can only be kept in RAM for now.
    expect((await send('message while filling', 'run-2')).state).toBe('final');
    expect(await health()).toMatchObject({
      status: 'degraded',
      store: { writable: false, persistent: false },
    });
    await expect.poll(() => systemErrors.map((error) => error.code)).toContain('STORE_UNAVAILABLE');
    // Spiderweb clients get the notice as an error frame right after session.ack.
    const { WebSocket } = await import('ws');
    const flat = new WebSocket(
      `${started.url}/v1/agents/main/stream?session=main&token=${runtime.state.token}`,
    );
    const frames: Array<{ type: string; code?: string; message?: string }> = [];
    flat.on('message', (data) => frames.push(JSON.parse(String(data))));
    await expect.poll(() => frames.map((frame) => frame.type)).toEqual(['session.ack', 'error']);
    expect(frames[1]).toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringContaining('cannot write'),
    });
    flat.close();

    // A new message cannot be stored, so it is not acknowledged: a retryable STORE_UNAVAILABLE, not INTERNAL.
    const refused = await client
      .call('chat.send', {
        sessionKey: 'agent:main:main',
        message: `refused ${'z'.repeat(8000)}`,
        idempotencyKey: 'run-refused',
      })
      .then(
        () => undefined,
        (error: { code: string; retryable: boolean }) => error,
      );
    expect(refused).toMatchObject({ code: 'STORE_UNAVAILABLE', retryable: true });

    const history = async () =>
      (
        await client!.call<{ messages: Array<{ content: Array<{ text: string }> | string }> }>(
          'chat.history',
          { sessionKey: 'agent:main:main' },
        )
      ).messages.map((message) =>
        typeof message.content === 'string'
          ? message.content
          : message.content.map((part) => part.text).join(''),
      );
    const beforeRecovery = ['message 1', 'reply 1', 'message while filling', bigReply];
    expect(await history()).toEqual(beforeRecovery);

    const recovered = new Promise<void>((resolve) => runtime!.bus.on('memory:recovered', () => resolve()));
    freeDisk();
    await recovered;
    expect(await health()).toMatchObject({ status: 'ok', store: { writable: true, persistent: true } });
    const after: string[] = [];
    for (let index = 0; index < 5; index++) {
      expect((await send(`after ${index}`, `run-after-${index}`)).state).toBe('final');
      after.push(`after ${index}`, `reply after ${index}`);
    }
    model.assertAllConsumed();
    await client.close();
    client = undefined;
    await runtime.close();
    runtime = undefined;

    // Nothing acknowledged is lost by a restart, and nothing is left to replay.
    const again = await startRuntime({ home, model: createScriptedModel({ steps: [] }) });
    runtime = again.runtime;
    client = await again.connect();
    expect(await history()).toEqual([...beforeRecovery, ...after]);
    expect(await runtime.store.kv.list('chat-inbox')).toEqual([]);
    expect(await runtime.store.kv.list('chat-running')).toEqual([]);
  });
});
