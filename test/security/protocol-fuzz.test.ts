import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { connectOpenClaw, FrameClient } from '../gateway/helpers.js';
import { type StartedGateway, startGateway } from './helpers.js';

/**
 * Seeded fuzzing of both wire protocols against a real runtime (real method table, chat service, store and
 * the offline local model) over real WebSocket connections. Every answer to a bad frame must carry a stable
 * error code, never INTERNAL; the gateway must keep answering; nothing may be left connected afterwards.
 */

let gateway: StartedGateway;
let methods: string[] = [];
const framesSent = { openclaw: 0, openclawFirst: 0, spiderweb: 0, invalidUtf8: 0 };

beforeAll(async () => {
  gateway = await startGateway();
  const { client, response } = await connectOpenClaw(gateway.url, { token: gateway.token });
  methods = response.payload.features.methods as string[];
  client.close();
  await client.closed;
});

afterAll(async () => {
  await gateway.runtime.close();
  const total = Object.values(framesSent).reduce((sum, count) => sum + count, 0);
  console.info(`protocol fuzz: ${total} frames (${JSON.stringify(framesSent)})`);
});

type Outgoing = { text: string; id?: string } | { bytes: Uint8Array };

const hostileString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom('', ' ', '\u0000', '../../etc/passwd', 'agent:main:main', 'agent::', '__proto__', '%00'),
  fc.constantFrom(1_000, 70_000, 300_000).map((length) => 'x'.repeat(length)),
);
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  hostileString,
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(-1, 0, 2 ** 53, 1e308, -1e308, true, false, null),
  fc.jsonValue({ maxDepth: 3 }),
);
const hostileParams = fc.oneof(
  fc.dictionary(
    fc.constantFrom(
      'sessionKey',
      'key',
      'message',
      'text',
      'idempotencyKey',
      'runId',
      'limit',
      'timeoutMs',
      'topic',
      'memoryIds',
      'kind',
      'agentId',
      'dir',
      'input',
      'label',
      'role',
      '__proto__',
      'constructor',
    ),
    hostileValue,
    { maxKeys: 6 },
  ),
  hostileValue,
);

/** Params a method would accept, with up to two fields replaced by hostile values: reaches the handlers. */
const mutatedParams = fc
  .tuple(
    fc.integer({ min: 0, max: 1_000_000 }),
    fc.dictionary(
      fc.constantFrom(
        'sessionKey',
        'key',
        'message',
        'idempotencyKey',
        'runId',
        'limit',
        'timeoutMs',
        'kind',
      ),
      hostileValue,
      { maxKeys: 2 },
    ),
  )
  .map(([unique, mutations]) => ({
    sessionKey: 'agent:main:fuzz',
    key: 'agent:main:fuzz',
    message: `fuzz ${unique}`,
    idempotencyKey: `fuzz-${unique}`,
    runId: `fuzz-${unique}`,
    limit: 5,
    timeoutMs: 1,
    kind: 'all',
    ...mutations,
  }));

/** `[[[[…]]]]` or `{"a":{"a":…}}`, far deeper than any schema. */
const deepNesting = fc
  .tuple(fc.integer({ min: 100, max: 5_000 }), fc.boolean())
  .map(([depth, arrays]) =>
    arrays ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`,
  );

function openClawFrame(nextId: () => string): fc.Arbitrary<Outgoing> {
  return fc.oneof(
    {
      weight: 6,
      arbitrary: fc
        .record({
          method: fc.oneof(fc.constantFrom(...methods), fc.string({ maxLength: 16 })),
          params: fc.oneof(hostileParams, mutatedParams),
        })
        .map(({ method, params }) => {
          const id = nextId();
          return { id, text: JSON.stringify({ type: 'req', id, method, params }) };
        }),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(fc.constantFrom(...methods), deepNesting).map(([method, nested]) => {
        const id = nextId();
        return { id, text: `{"type":"req","id":"${id}","method":"${method}","params":${nested}}` };
      }),
    },
    {
      weight: 1,
      arbitrary: fc
        .record(
          {
            type: fc.oneof(fc.constant('req'), hostileValue),
            id: hostileValue,
            method: hostileValue,
            params: hostileValue,
          },
          { requiredKeys: [] },
        )
        .map((frame) => ({ text: JSON.stringify(frame) })),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 64 }).map((text) => ({ text })) },
    { weight: 1, arbitrary: deepNesting.map((text) => ({ text })) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 256 }).map((bytes) => ({ bytes })) },
  );
}

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

function spiderwebFrame(nextId: () => string): fc.Arbitrary<Outgoing> {
  return fc.oneof(
    {
      weight: 6,
      arbitrary: fc
        .record({
          type: fc.oneof(fc.constantFrom(...spiderwebTypes), fc.string({ maxLength: 12 })),
          fields: fc.dictionary(
            fc.constantFrom(
              'content',
              'text',
              'archive',
              'limit',
              'memoryId',
              'memoryIds',
              'topic',
              'kind',
              'include_archived',
              'include_full',
              'capabilities',
              'agent_config',
              'action',
              'goal',
            ),
            hostileValue,
            { maxKeys: 5 },
          ),
        })
        .map(({ type, fields }) => {
          const id = nextId();
          return { id, text: JSON.stringify({ ...fields, type, id }) };
        }),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(fc.constantFrom(...spiderwebTypes), deepNesting).map(([type, nested]) => {
        const id = nextId();
        return { id, text: `{"type":"${type}","id":"${id}","content":${nested},"capabilities":${nested}}` };
      }),
    },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((value) => ({ text: JSON.stringify(value) })) },
    { weight: 1, arbitrary: fc.string({ maxLength: 64 }).map((text) => ({ text })) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 256 }).map((bytes) => ({ bytes })) },
  );
}

function send(client: FrameClient, frame: Outgoing): void {
  if ('text' in frame) client.ws.send(frame.text);
  else client.ws.send(frame.bytes, { binary: true });
}

function idGenerator(prefix: string) {
  let counter = 0;
  return () => `${prefix}${++counter}`;
}

describe('protocol fuzzing against a real runtime', () => {
  it('OpenClaw, connected: 2,000 hostile frames; every error has a stable code, the connection keeps answering', async () => {
    const nextId = idGenerator('f');
    const frames = fc.sample(openClawFrame(nextId), { numRuns: 2_000, seed: 9001 });
    const { client } = await connectOpenClaw(gateway.url, { token: gateway.token });
    const expected = new Set<string>();
    for (let index = 0; index < frames.length; index++) {
      const frame = frames[index]!;
      send(client, frame);
      framesSent.openclaw++;
      if ('id' in frame && frame.id) expected.add(frame.id);
      if (index % 40 === 39) {
        const probe = await client.request('health', {}, `probe-${index}`);
        expect(probe.ok, JSON.stringify(probe.error)).toBe(true);
      }
    }
    expect((await client.request('health', {}, 'probe-end')).ok).toBe(true);
    const responses = client.frames.filter((frame) => frame.type === 'res');
    const errors = responses.filter((frame) => frame.ok === false);
    const internal = errors.filter((frame) => frame.error?.code === 'INTERNAL');
    expect(internal.map((frame) => frames.find((sent) => 'id' in sent && sent.id === frame.id))).toEqual([]);
    for (const error of errors) expect(error.error.code).toMatch(/^[A-Z][A-Z_]+$/);
    // Every request with a usable id was answered (requests still running were answered `accepted`).
    const answered = new Set(responses.map((frame) => frame.id as string));
    expect([...expected].filter((id) => !answered.has(id))).toEqual([]);
    client.close();
    await client.closed;
  });

  it('OpenClaw, first frames: 300 fresh connections each get a hostile first frame and are closed', async () => {
    const frames = fc.sample(openClawFrame(idGenerator('c')), { numRuns: 300, seed: 9002 });
    for (const frame of frames) {
      const client = await FrameClient.open(gateway.url);
      await client.nextEvent('connect.challenge');
      send(client, frame);
      framesSent.openclawFirst++;
      const closed = await client.closed;
      expect([1002, 1008, 1009]).toContain(closed.code);
      const answers = client.frames.filter((sent) => sent.type === 'res');
      for (const answer of answers) expect(answer.error?.code).not.toBe('INTERNAL');
    }
  });

  it('Spiderweb: 1,500 hostile frames; every error has a stable code, pings keep being answered', async () => {
    const nextId = idGenerator('s');
    const frames = fc.sample(spiderwebFrame(nextId), { numRuns: 1_500, seed: 9003 });
    const client = await FrameClient.open(
      `${gateway.url}/v1/agents/main/stream?session=fuzz&token=${gateway.token}`,
    );
    await client.next((frame) => frame.type === 'session.ack');
    for (let index = 0; index < frames.length; index++) {
      send(client, frames[index]!);
      framesSent.spiderweb++;
      if (index % 40 === 39) {
        client.send({ type: 'ping', id: `probe-${index}` });
        await client.next((frame) => frame.type === 'pong' && frame.request === `probe-${index}`);
      }
    }
    client.send({ type: 'ping', id: 'probe-end' });
    await client.next((frame) => frame.type === 'pong' && frame.request === 'probe-end');
    const errors = client.frames.filter((frame) => frame.type === 'error');
    expect(errors.filter((frame) => frame.code === 'internal')).toEqual([]);
    for (const error of errors) expect(error.code).toMatch(/^[a-z][a-z_]+$|^STORE_UNAVAILABLE$/);
    client.close();
    await client.closed;
  });

  it('invalid UTF-8 in text frames closes with 1007 on both protocols, and the gateway carries on', async () => {
    const payloads = fc.sample(
      fc
        .uint8Array({ minLength: 1, maxLength: 64 })
        .map((bytes) => Buffer.concat([Buffer.from(bytes), Buffer.from([0xc3, 0x28, 0xff])])),
      { numRuns: 40, seed: 9004 },
    );
    for (const [index, payload] of payloads.entries()) {
      const spiderweb = index % 2 === 1;
      const client = await FrameClient.open(
        spiderweb ? `${gateway.url}/v1/agents/main/stream?session=utf8&token=${gateway.token}` : gateway.url,
      );
      await (spiderweb
        ? client.next((frame) => frame.type === 'session.ack')
        : client.nextEvent('connect.challenge'));
      client.ws.send(payload, { binary: false });
      framesSent.invalidUtf8++;
      expect((await client.closed).code).toBe(1007);
    }
  });

  it('leaves no connection or subscription behind, and still serves a fresh client', async () => {
    await vi.waitFor(() => {
      expect(gateway.server.connectionCount).toBe(0);
      expect(gateway.server.hub.sinkCount).toBe(0);
    });
    const { client, response } = await connectOpenClaw(gateway.url, { token: gateway.token });
    expect(response.ok).toBe(true);
    expect((await client.request('health', {})).ok).toBe(true);
    client.close();
    await client.closed;
    const total = Object.values(framesSent).reduce((sum, count) => sum + count, 0);
    expect(total).toBeGreaterThanOrEqual(3_800);
  });
});
