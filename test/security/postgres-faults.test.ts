import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { GatewayClient } from '../../src/cli/gateway-client.js';
import type { Runtime } from '../../src/runtime.js';
import { createPostgresDatabase } from '../../src/store/index.js';
import { createScratchPostgresDatabase, postgresTestBackend } from '../helpers/databases.js';
import { startRuntime, tempHome } from '../runtime/helpers.js';

interface HistoryMessage {
  role: string;
  content: string | Array<{ text: string }>;
}
const textOf = (message: HistoryMessage) =>
  typeof message.content === 'string' ? message.content : message.content.map((part) => part.text).join('');

/** The ErrorResponse a backend sends when `pg_terminate_backend` ends it. */
function terminationMessage(): Buffer {
  const fields = Buffer.concat(
    [
      ['S', 'FATAL'],
      ['V', 'FATAL'],
      ['C', '57P01'],
      ['M', 'terminating connection due to administrator command'],
    ].map(([field, value]) => Buffer.from(`${field}${value}\0`)),
  );
  const body = Buffer.concat([fields, Buffer.from([0])]);
  const header = Buffer.alloc(5);
  header.write('E', 0);
  header.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([header, body]);
}

/**
 * A TCP proxy in front of the real server that, once armed, delivers the next ReadyForQuery together with a
 * termination notice in one packet and closes the connection: the exact moment a kill can hit a pooled
 * connection that was just handed from a finished query to a waiting transaction.
 */
async function startTerminatingProxy(
  target: URL,
): Promise<{ url: string; arm(): void; close(): Promise<void> }> {
  let armed = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    client.on('data', (chunk) => upstream.write(chunk));
    client.on('close', () => upstream.destroy());
    client.on('error', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    upstream.on('error', () => client.destroy());
    let pending = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      let end = 0;
      while (pending.length - end >= 5) {
        const length = pending.readInt32BE(end + 1);
        if (pending.length - end < length + 1) break;
        const type = String.fromCharCode(pending[end]!);
        end += length + 1;
        if (armed && type === 'Z') {
          armed = false;
          client.end(Buffer.concat([pending.subarray(0, end), terminationMessage()]));
          upstream.destroy();
          return;
        }
      }
      client.write(pending.subarray(0, end));
      pending = pending.subarray(end);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as { port: number }).port);
  return {
    url: url.toString(),
    arm: () => {
      armed = true;
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

describe('Postgres connections terminated under load', () => {
  let runtime: Runtime | undefined;
  let client: GatewayClient | undefined;
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await client?.close();
    await runtime?.close();
    client = undefined;
    runtime = undefined;
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  it('chat and the work queue resume and nothing acknowledged is lost', async () => {
    const database = await createScratchPostgresDatabase('agentd_term');
    cleanups.push(() => database.drop());
    const started = await startRuntime({
      home: tempHome('agentd-pg-term-'),
      env: { DATABASE_URL: database.url },
    });
    runtime = started.runtime;
    client = await started.connect();

    // Only this test's database: every backend connected to it except the admin connection itself.
    let terminated = 0;
    const terminate = async () => {
      const result = await database.admin.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
        [database.name],
      );
      terminated += result.rowCount ?? 0;
    };

    const acknowledged = new Set<string>();
    const items = new Set<string>();
    const sessionKeys = ['agent:main:main', 'agent:main:other'];
    const calls: Array<Promise<unknown>> = [];
    for (let index = 0; index < 16; index++) {
      const text = `message ${index}`;
      calls.push(
        client
          .call('chat.send', {
            sessionKey: sessionKeys[index % 2],
            message: text,
            idempotencyKey: `run-${index}`,
          })
          .then(
            () => acknowledged.add(text),
            // Refused while the connection was gone: a retryable STORE_UNAVAILABLE, never INTERNAL.
            (error: { code: string }) => expect(error.code).toBe('STORE_UNAVAILABLE'),
          ),
      );
      if (index % 2 === 0)
        calls.push(
          client
            .call<{ id: string }>('work.submit', {
              kind: 'task',
              agentId: 'main',
              description: `item ${index}`,
            })
            .then(
              (item) => items.add(item.id),
              (error: { code: string }) => expect(error.code).toBe('STORE_UNAVAILABLE'),
            ),
        );
      if (index % 5 === 4) await terminate();
    }
    await Promise.all(calls);
    await terminate();
    expect(terminated).toBeGreaterThan(0);
    expect(acknowledged.size).toBeGreaterThan(0);

    await expect
      .poll(
        async () => {
          const health = await client!.call<{ status: string; runs: { active: number } }>('health', {});
          const listed = await client!.call<{ items: Array<{ id: string; state: string }> }>('work.list', {
            limit: 1000,
          });
          const open = listed.items.filter((item) => items.has(item.id) && item.state !== 'completed').length;
          return { status: health.status, active: health.runs.active, open };
        },
        { timeout: 20_000, interval: 200 },
      )
      .toEqual({ status: 'ok', active: 0, open: 0 });

    const seen = new Map<string, number>();
    for (const sessionKey of sessionKeys) {
      const { messages } = await client.call<{ messages: HistoryMessage[] }>('chat.history', { sessionKey });
      for (const [index, message] of messages.entries()) {
        if (message.role !== 'user') continue;
        seen.set(textOf(message), (seen.get(textOf(message)) ?? 0) + 1);
        expect([textOf(message), messages[index + 1]?.role]).toEqual([textOf(message), 'assistant']);
      }
    }
    for (const text of acknowledged) expect([text, seen.get(text)]).toEqual([text, 1]);
    console.log(
      `[postgres faults] backends terminated=${terminated} acknowledged=${acknowledged.size}/16 items=${items.size}/8`,
    );
  }, 60_000);

  it('a termination in the packet that hands a connection to a waiting transaction does not crash agentd', async () => {
    const backend = await postgresTestBackend();
    if (backend.kind !== 'server')
      throw new Error('this test needs a Postgres server (AGENTD_TEST_PG_URL or 127.0.0.1:5432)');
    const proxy = await startTerminatingProxy(new URL(backend.url));
    const db = createPostgresDatabase({ connectionString: proxy.url, poolSize: 1 });
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', onUncaught);
    cleanups.push(async () => {
      process.off('uncaughtException', onUncaught);
      await db.close();
      await proxy.close();
    });
    await db.all('SELECT 1');

    proxy.arm();
    // The pool's one connection runs the query; the transaction waits for it and receives it the moment
    // the query's ReadyForQuery is read, with the termination notice right behind it in the same packet.
    const [query, transaction] = await Promise.allSettled([
      db.all('SELECT pg_sleep(0.05)'),
      db.transaction((tx) => tx.all('SELECT 1')),
    ]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(uncaught).toEqual([]);
    expect(query.status).toBe('fulfilled');
    expect(transaction).toMatchObject({
      status: 'rejected',
      reason: { code: 'STORE_UNAVAILABLE', retryable: true },
    });
    // The broken connection is gone; the next transaction gets a fresh one.
    expect(await db.transaction((tx) => tx.get('SELECT 1 AS one'))).toEqual({ one: 1 });
  });
});
