import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  connectOpenClaw,
  FrameClient,
  openClawRequestMethods,
  startTestGateway,
  type TestGateway,
  testToken,
} from './helpers.js';

/**
 * 1,000 random frames in all: 400 to a connected OpenClaw client, 200 as the first frame of fresh OpenClaw
 * connections, 400 to a Spiderweb client. The gateway must not crash, must keep answering, and must end
 * with no connection, subscription or run left behind.
 */
const spiderwebTypes = [
  'ping',
  'chat.send',
  'session.send',
  'session.new',
  'session.reset',
  'memory.query',
  'memory.recall',
  'agent.control',
  'agent.heartbeat',
  'agent_spawn_request',
  'session.capabilities',
];

const sessionKey = fc.oneof(
  fc.constantFrom('main', 'agent:main:p', 'agent:other:q', 'agent::', ''),
  fc.string({ maxLength: 20 }),
);
const plausibleParams = fc.record(
  {
    sessionKey,
    key: sessionKey,
    message: fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom('/stop', '/new', '/reset', '')),
    idempotencyKey: fc.oneof(fc.constantFrom('k1', 'k2'), fc.string({ maxLength: 10 })),
    limit: fc.oneof(fc.integer(), fc.double()),
    runId: fc.constantFrom('k1', 'k2', 'none'),
    keys: fc.array(sessionKey, { maxLength: 3 }),
    timeout: fc.constantFrom(0.001, 1, -1),
    kind: fc.constantFrom('summary', 'entry', 'all', 'bad'),
  },
  { requiredKeys: [] },
);
const anyJson = fc.jsonValue({ maxDepth: 3 });

type Outgoing = { text: string } | { bytes: Uint8Array };

const openClawFrame: fc.Arbitrary<Outgoing> = fc.oneof(
  fc
    .record({
      type: fc.oneof(fc.constant('req'), fc.string({ maxLength: 5 })),
      id: fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.constant(null)),
      method: fc.oneof(fc.constantFrom(...openClawRequestMethods), fc.string({ maxLength: 12 })),
      params: fc.oneof(plausibleParams, anyJson),
    })
    .map((frame) => ({ text: JSON.stringify(frame) })),
  anyJson.map((value) => ({ text: JSON.stringify(value) })),
  fc.string({ maxLength: 64 }).map((text) => ({ text })),
  fc.uint8Array({ maxLength: 128 }).map((bytes) => ({ bytes })),
);

const spiderwebFrame: fc.Arbitrary<Outgoing> = fc.oneof(
  fc
    .record(
      {
        type: fc.oneof(fc.constantFrom(...spiderwebTypes), fc.string({ maxLength: 8 }), fc.integer()),
        id: fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.double()),
        content: fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom('/new', '/goal x', ''), fc.integer()),
        archive: fc.oneof(fc.boolean(), fc.string()),
        limit: fc.oneof(fc.integer(), fc.string()),
        memoryIds: fc.oneof(fc.array(fc.integer(), { maxLength: 3 }), fc.string()),
        topic: fc.oneof(fc.string({ maxLength: 10 }), fc.integer()),
        capabilities: fc.oneof(fc.array(fc.string({ maxLength: 10 }), { maxLength: 3 }), anyJson),
        agent_config: anyJson,
        action: fc.string({ maxLength: 8 }),
      },
      { requiredKeys: ['type'] },
    )
    .map((frame) => ({ text: JSON.stringify(frame) })),
  anyJson.map((value) => ({ text: JSON.stringify(value) })),
  fc.string({ maxLength: 64 }).map((text) => ({ text })),
  fc.uint8Array({ maxLength: 128 }).map((bytes) => ({ bytes })),
);

function send(client: FrameClient, frame: Outgoing): void {
  if ('text' in frame) client.ws.send(frame.text);
  else client.ws.send(frame.bytes, { binary: true });
}

let gateway: TestGateway;

beforeAll(async () => {
  gateway = await startTestGateway({ chat: { deltas: 2 } });
});

afterAll(async () => {
  await gateway.close();
});

describe('random frames', () => {
  it('a connected OpenClaw client: 400 frames, the connection keeps answering', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(openClawFrame, { minLength: 400, maxLength: 400 }), async (frames) => {
        const { client } = await connectOpenClaw(gateway.url);
        for (let index = 0; index < frames.length; index++) {
          send(client, frames[index]!);
          if (index % 50 === 49) expect((await client.request('health', {}, `probe-${index}`)).ok).toBe(true);
        }
        expect((await client.request('health', {}, 'probe-end')).ok).toBe(true);
        client.close();
        await client.closed;
      }),
      { numRuns: 1, seed: 4242 },
    );
  });

  it('fresh OpenClaw connections: 200 random first frames, each refused and closed', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(openClawFrame, { minLength: 200, maxLength: 200 }), async (frames) => {
        for (const frame of frames) {
          const client = await FrameClient.open(gateway.url);
          await client.nextEvent('connect.challenge');
          send(client, frame);
          const closed = await client.closed;
          expect([1002, 1008]).toContain(closed.code);
        }
      }),
      { numRuns: 1, seed: 4343 },
    );
  });

  it('a Spiderweb client: 400 frames, the connection keeps answering', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(spiderwebFrame, { minLength: 400, maxLength: 400 }), async (frames) => {
        const client = await FrameClient.open(
          `${gateway.url}/v1/agents/main/stream?session=prop&token=${testToken}`,
        );
        await client.next((frame) => frame.type === 'session.ack');
        for (let index = 0; index < frames.length; index++) {
          send(client, frames[index]!);
          if (index % 50 === 49) {
            client.send({ type: 'ping', id: `probe-${index}` });
            await client.next((frame) => frame.type === 'pong' && frame.request === `probe-${index}`);
          }
        }
        client.close();
        await client.closed;
      }),
      { numRuns: 1, seed: 4444 },
    );
  });

  it('leaves no connection, subscription or run behind', async () => {
    await vi.waitFor(() => {
      expect(gateway.server.connectionCount).toBe(0);
      expect(gateway.server.hub.sinkCount).toBe(0);
      expect(gateway.chat.activeRuns).toBe(0);
      expect(gateway.server.hub.activeRuns).toBe(0);
    });
    const { client } = await connectOpenClaw(gateway.url);
    expect((await client.request('health')).ok).toBe(true);
    client.close();
    await client.closed;
  });
});
