import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { createOutbound } from '../../src/gateway/outbound.js';
import { silentLogger } from '../../src/util/index.js';

// Every write on loopback wakes the reading client; frames a turn sends in one event-loop turn go out in
// one write instead of one each.
let server: WebSocketServer | undefined;
afterEach(async () => {
  for (const client of server?.clients ?? []) client.terminate();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

/** A connected pair: the server side's outbound, its socket writes counted, and what the client received. */
async function countedPair() {
  server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await once(server, 'listening');
  const accepted = once(server, 'connection') as Promise<[WebSocket]>;
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`);
  await once(client, 'open');
  const [socket] = await accepted;
  const raw = (socket as unknown as { _socket: { _writev: unknown; _write: unknown } })._socket;
  const counted = { writes: 0 };
  for (const method of ['_write', '_writev'] as const) {
    const original = raw[method] as (...args: unknown[]) => unknown;
    raw[method] = function (this: unknown, ...args: unknown[]) {
      counted.writes++;
      return original.apply(this, args);
    };
  }
  const outbound = createOutbound(socket, {
    maxBufferedBytes: 1 << 20,
    closeGraceMs: 1_000,
    logger: silentLogger,
  });
  const received: unknown[] = [];
  client.on('message', (data) => received.push(JSON.parse(String(data))));
  return { client, outbound, counted, received };
}

it('sends the frames of one event-loop turn in one socket write, in order', async () => {
  const { client, outbound, counted, received } = await countedPair();
  for (let index = 0; index < 5; index++) expect(outbound.send({ index })).toBe(true);
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(counted.writes).toBe(1);
  expect(received).toEqual([0, 1, 2, 3, 4].map((index) => ({ index })));
  // A later turn's frame is written on its own, and none waits for another frame to come.
  outbound.send({ index: 5 });
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(counted.writes).toBe(2);
  expect(received).toHaveLength(6);
  client.close();
});

it('writes what the turn queued at once on flush, and corks again for the frames after it', async () => {
  const { client, outbound, counted, received } = await countedPair();
  outbound.send({ index: 0 });
  outbound.send({ index: 1 });
  expect(counted.writes).toBe(0);
  outbound.flush();
  // Written before this synchronous step ends, both frames in one write.
  expect(counted.writes).toBe(1);
  outbound.send({ index: 2 });
  outbound.send({ index: 3 });
  expect(counted.writes).toBe(1);
  await new Promise((resolve) => setImmediate(resolve));
  expect(counted.writes).toBe(2);
  outbound.flush();
  expect(counted.writes).toBe(2);
  // A flush cancels its cork's pending uncork: that uncork must not write the next cork's frames early,
  // apart from a frame that joins them before the end of the turn.
  outbound.send({ index: 4 });
  setImmediate(() => outbound.send({ index: 6 }));
  outbound.flush();
  expect(counted.writes).toBe(3);
  outbound.send({ index: 5 });
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(counted.writes).toBe(4);
  expect(received).toEqual([0, 1, 2, 3, 4, 5, 6].map((index) => ({ index })));
  client.close();
});
