import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { maxWatchedSessionsPerSink } from '../../src/gateway/event-hub.js';
import { createMethodTable } from '../../src/gateway/index.js';
import {
  createOpenClawDispatcher,
  heldEventsMaxWaitMs,
  maxHeldEvents,
} from '../../src/gateway/openclaw-dispatch.js';
import { createRecordingLogger, silentLogger } from '../../src/util/index.js';
import { FrameClient, startTestGateway, type TestGateway, testMethodContext, testToken } from './helpers.js';

/**
 * What a hostile client can make one connection keep: events held for an `answer-*` pong it never sends,
 * and session watches.
 */
describe('OpenClaw connection bounds', () => {
  let gateway: TestGateway | undefined;

  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
  });

  const start = async (options: Parameters<typeof startTestGateway>[0] = {}) => {
    gateway = await startTestGateway(options);
    return gateway;
  };

  /** Connects a client that never answers a WebSocket ping. */
  const connectWithoutPongs = async (url: string, scopes: string[]) => {
    const client = await FrameClient.open(url, { autoPong: false });
    await client.nextEvent('connect.challenge');
    const hello = await client.request('connect', {
      minProtocol: 4,
      maxProtocol: 4,
      client: { id: 'test', mode: 'cli' },
      role: 'operator',
      scopes,
      auth: { token: testToken },
    });
    expect(hello.ok).toBe(true);
    return client;
  };

  const runStarted = (runId: string, sessionKey: string) =>
    gateway!.bus.publish(
      'run:started',
      { runId, sessionKey, agentId: 'main', model: 'fake/echo' },
      { runId, sessionKey, agentId: 'main' },
    );

  it('does not hold events after a refused chat.send', async () => {
    const { url } = await start();
    const client = await connectWithoutPongs(url, ['operator.read']);
    await client.request('chat.history', { sessionKey: 'agent:main:watched' });
    const refused = await client.request('chat.send', {
      sessionKey: 'agent:main:watched',
      message: 'hi',
      idempotencyKey: 'refused-1',
    });
    expect(refused.ok).toBe(false);
    // The client never sends the pong an answer ping asks for: an event held for it would come after the
    // next answer (2 s later). Delivered at once, it comes before.
    runStarted('other-run', 'agent:main:watched');
    const health = await client.request('health');
    const event = client.frames.findIndex(
      (frame) => frame.type === 'event' && frame.event === 'agent' && frame.payload.runId === 'other-run',
    );
    expect(event).toBeGreaterThan(-1);
    expect(event).toBeLessThan(client.frames.indexOf(health));
    client.close();
  });

  it('disconnects, as a slow consumer, a client whose held events pass maxBufferedBytes', async () => {
    const logger = createRecordingLogger();
    const { url } = await start({
      limits: { maxBufferedBytes: 64 * 1024 },
      chat: { holdRuns: true },
      logger,
    });
    const client = await connectWithoutPongs(url, ['operator.read', 'operator.write']);
    const ack = await client.request('chat.send', {
      sessionKey: 'agent:main:held',
      message: 'hi',
      idempotencyKey: 'held-1',
    });
    expect(ack.payload.status).toBe('started');
    // The run's events are held for the pong that never comes; each carries the whole text so far.
    const scope = { runId: 'held-1', sessionKey: 'agent:main:held', agentId: 'main' };
    let text = '';
    for (let index = 0; index < 8 && gateway!.server.connectionCount > 0; index++) {
      const delta = 'z'.repeat(4 * 1024);
      text += delta;
      gateway!.bus.publish('run:text-delta', { runId: 'held-1', delta, text }, scope);
    }
    const closed = await Promise.race([
      client.closed.then(() => 'closed'),
      new Promise((resolve) => setTimeout(() => resolve('still open'), heldEventsMaxWaitMs / 2)),
    ]);
    expect(closed).toBe('closed');
    expect(gateway!.server.connectionCount).toBe(0);
    // Closed, not released: none of the held assistant events reached the client.
    expect(
      client.frames.some((frame) => frame.event === 'agent' && frame.payload.stream === 'assistant'),
    ).toBe(false);
    expect(logger.records.some((record) => record.message === 'gateway: slow consumer disconnected')).toBe(
      true,
    );
    gateway!.chat.releaseRun('held-1');
  });

  it('keeps at most maxWatchedSessionsPerSink watches per connection, dropping the oldest', async () => {
    const { url, server } = await start({ limits: { maxPendingRequests: 256 } });
    const client = await connectWithoutPongs(url, ['operator.read']);
    const history = (keys: string[]) =>
      Promise.all(keys.map((sessionKey) => client.request('chat.history', { sessionKey, limit: 1 })));
    const keys = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, index) => `agent:main:s${from + index}`);

    await history(['agent:main:kept']);
    for (let from = 0; from < 600; from += 200) await history(keys(from, from + 200));
    // Watched again: it becomes the newest watch.
    await history(['agent:main:kept']);
    for (let from = 600; from < 1_200; from += 200) await history(keys(from, from + 200));

    // The 200 sessions watched longest ago were dropped: their events no longer come.
    runStarted('run-first', 'agent:main:s0');
    runStarted('run-kept', 'agent:main:kept');
    runStarted('run-last', 'agent:main:s1199');
    await client.request('health');
    const runIds = client.frames
      .filter((frame) => frame.type === 'event' && frame.event === 'agent')
      .map((frame) => frame.payload.runId);
    expect(runIds).toEqual(['run-kept', 'run-last']);
    expect(server.hub.watchCount).toBeLessThanOrEqual(maxWatchedSessionsPerSink);
    expect(server.hub.watchCount).toBe(maxWatchedSessionsPerSink);
    client.close();
    await vi.waitFor(() => expect(server.hub.watchCount).toBe(0));
  });

  it('closes, and does not release, past maxHeldEvents held events however small', async () => {
    const table = createMethodTable();
    table.register('chat.send', {
      scopes: [],
      params: z.looseObject({}),
      handler: () => ({ runId: 'r1', status: 'started' }),
    });
    const context = testMethodContext([]);
    const pings: string[] = [];
    const overflows: string[] = [];
    const dispatcher = createOpenClawDispatcher({
      table,
      context,
      send: () => true,
      isOpen: () => true,
      ping: (token) => pings.push(token),
      maxPendingRequests: 4,
      maxHeldBytes: 1024 * 1024,
      overflow: (reason) => overflows.push(reason),
      logger: silentLogger,
    });
    dispatcher.onFrame(JSON.stringify({ type: 'req', id: '1', method: 'chat.send', params: {} }));
    await vi.waitFor(() => expect(pings).toHaveLength(1));
    let sent = 0;
    for (let index = 0; index < maxHeldEvents + 10; index++) dispatcher.whenNotHolding(() => sent++, 1);
    expect(overflows).toEqual([expect.stringMatching(/^slow consumer: more than 10000 events held/)]);
    dispatcher.onPong(pings[0]!);
    dispatcher.close();
    expect(sent).toBe(0);
  });
});
