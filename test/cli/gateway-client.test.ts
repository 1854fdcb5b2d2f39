import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { connectGateway } from '../../src/cli/gateway-client.js';

let server: WebSocketServer | undefined;
afterEach(async () => {
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

/** A gateway that sends `noise` before and after its challenge, then answers `connect` and `echo`. */
async function noisyGateway(noise: string[]): Promise<string> {
  server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((resolve) => server!.once('listening', resolve));
  server.on('connection', (socket) => {
    for (const text of noise) socket.send(text);
    socket.send(JSON.stringify({ type: 'event', event: 'connect.challenge', payload: { nonce: 'n' } }));
    socket.on('message', (data) => {
      const request = JSON.parse(String(data));
      for (const text of noise) socket.send(text);
      const payload =
        request.method === 'connect'
          ? { type: 'hello-ok', protocol: 4, server: { version: 'fake', connId: 'c1' } }
          : { echoed: request.params };
      socket.send(JSON.stringify({ type: 'res', id: request.id, ok: true, payload }));
    });
  });
  return `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('the CLI gateway client', () => {
  it('ignores frames that are not JSON objects, before and after the challenge, instead of crashing', async () => {
    const url = await noisyGateway(['not json', 'null', '42', '"text"', '[1,2]', '{"type":"res"}', '{']);
    const client = await connectGateway({ url, token: 't', timeoutMs: 5_000 });
    try {
      expect(client.hello).toMatchObject({ type: 'hello-ok', server: { connId: 'c1' } });
      expect(await client.call('echo', { n: 1 })).toEqual({ echoed: { n: 1 } });
    } finally {
      await client.close();
    }
  });
});
