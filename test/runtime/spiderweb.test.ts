import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startRuntime } from './helpers.js';

/** A minimal Spiderweb client: sends flat frames, collects every message it receives. */
async function spiderweb(url: string) {
  const socket = new WebSocket(url);
  const received: any[] = [];
  const waiters: Array<{ match: (message: any) => boolean; resolve: (message: any) => void }> = [];
  socket.on('message', (data) => {
    const message = JSON.parse(String(data));
    received.push(message);
    for (const waiter of [...waiters]) {
      if (waiter.match(message)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(message);
      }
    }
  });
  const next = (match: (message: any) => boolean) =>
    new Promise<any>((resolve) => {
      const seen = received.find(match);
      if (seen) resolve(seen);
      else waiters.push({ match, resolve });
    });
  await new Promise((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  return { socket, received, next, send: (frame: unknown) => socket.send(JSON.stringify(frame)) };
}

describe('a Spiderweb client against the whole runtime', () => {
  it('chats with memory ids, queries memory, starts a new session, and keeps the old one recallable', async () => {
    const started = await startRuntime();
    const base = started.url.replace(/\/$/, '');
    const client = await spiderweb(
      `${base}/v1/agents/main/stream?session=web&token=${started.runtime.state.token}`,
    );
    try {
      const ack = await client.next((message) => message.type === 'session.ack');
      expect(ack).toMatchObject({ sessionKey: 'agent:main:web', agentId: 'main' });

      client.send({
        type: 'chat.send',
        id: 'm1',
        content: 'The launch window opens on Tuesday.',
        unknownField: 1,
      });
      const first = await client.next(
        (message) => message.type === 'session.receive' && message.request === 'm1',
      );
      expect(first.content).toContain('[local model]');
      expect(first.memoryId).toBe(2);

      client.send({ type: 'session.send', id: 'm2', content: 'When does the launch window open?' });
      const second = await client.next(
        (message) => message.type === 'session.receive' && message.request === 'm2',
      );
      expect(second.content).toContain('Tuesday');

      client.send({ type: 'memory.query', id: 'q1', topic: 'launch window', kind: 'entry', limit: 10 });
      const query = await client.next(
        (message) => message.type === 'memory.query' && message.request === 'q1',
      );
      expect(query.items.map((item: { id: number }) => item.id)).toEqual(expect.arrayContaining([1]));
      expect(query.items[0]).toMatchObject({ kind: 'entry', role: expect.any(String), state: 'active' });

      client.send({ type: 'chat.send', id: 'm3', content: '/new' });
      await client.next(
        (message) =>
          message.request === 'm3' && (message.type === 'session.new' || message.type === 'session.receive'),
      );
      client.send({ type: 'memory.recall', id: 'q2', limit: 25, include_archived: true, include_full: true });
      const recall = await client.next(
        (message) => message.type === 'memory.recall' && message.request === 'q2',
      );
      expect(JSON.stringify(recall.items)).toContain('Tuesday');

      client.send({ type: 'ping', id: 'p' });
      expect(await client.next((message) => message.type === 'pong')).toMatchObject({ request: 'p' });
      client.send({ type: 'no.such.thing', id: 'x' });
      client.send('not json at all');
      client.send({ type: 'ping', id: 'p2' });
      expect(
        await client.next((message) => message.type === 'pong' && message.request === 'p2'),
      ).toBeTruthy();
    } finally {
      client.socket.close();
      await started.runtime.close();
    }
  });

  it('refuses a connection without the token', async () => {
    const started = await startRuntime();
    try {
      const socket = new WebSocket(`${started.url.replace(/\/$/, '')}/v1/agents/main/stream?session=web`);
      const status = await new Promise<number>((resolve) => {
        socket.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
        socket.once('open', () => resolve(101));
      });
      expect(status).toBe(401);
    } finally {
      await started.runtime.close();
    }
  });
});
