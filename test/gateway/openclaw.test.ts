import { generateKeyPairSync, sign } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { deviceAuthPayload, deviceIdForPublicKey } from '../../src/gateway/index.js';
import { createRecordingLogger } from '../../src/util/index.js';
import {
  connectOpenClaw,
  coreOpenClawMethods,
  FrameClient,
  startTestGateway,
  type TestGateway,
  testToken,
} from './helpers.js';

let gateway: TestGateway | undefined;
const clients: FrameClient[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) client.ws.terminate();
  await gateway?.close();
  gateway = undefined;
});

async function start(options: Parameters<typeof startTestGateway>[0] = {}) {
  gateway = await startTestGateway(options);
  return gateway;
}

async function connect(options: Parameters<typeof connectOpenClaw>[1] = {}) {
  const result = await connectOpenClaw(gateway!.url, options);
  clients.push(result.client);
  return result;
}

describe('OpenClaw handshake', () => {
  it('sends a challenge, negotiates v4 and answers hello-ok with features, snapshot and policy', async () => {
    await start({ limits: { tickIntervalMs: 60_000 } });
    const { response, challenge } = await connect({ minProtocol: 3, maxProtocol: 4 });
    expect(challenge).toMatchObject({
      type: 'event',
      event: 'connect.challenge',
      payload: { nonce: expect.any(String) },
    });
    expect(challenge.seq).toBeUndefined();
    expect(response).toMatchObject({ type: 'res', id: 'connect-1', ok: true });
    const hello = response.payload;
    expect(hello).toMatchObject({
      type: 'hello-ok',
      protocol: 4,
      server: { version: 'test', connId: expect.any(String) },
      snapshot: {
        presence: [],
        health: { ok: true },
        stateVersion: { presence: 0, health: 0 },
        uptimeMs: expect.any(Number),
        sessionDefaults: { defaultAgentId: 'main', mainKey: 'main', mainSessionKey: 'agent:main:main' },
      },
      auth: { role: 'operator', scopes: ['operator.read', 'operator.write', 'operator.admin'] },
      policy: { maxPayload: 4 * 1024 * 1024, maxBufferedBytes: 8 * 1024 * 1024, tickIntervalMs: 60_000 },
    });
    expect(hello.features.methods).toEqual(expect.arrayContaining(coreOpenClawMethods));
    expect(hello.features.events).toEqual(
      expect.arrayContaining(['connect.challenge', 'agent', 'chat', 'tick', 'shutdown']),
    );
  });

  it('speaks v3 to a v3-only client', async () => {
    await start();
    const { response } = await connect({ minProtocol: 3, maxProtocol: 3 });
    expect(response.payload.protocol).toBe(3);
  });

  it('refuses a protocol it does not speak and closes with 1002', async () => {
    await start();
    const { client, response } = await connect({ minProtocol: 5, maxProtocol: 6 });
    expect(response.error).toMatchObject({
      code: 'INVALID_REQUEST',
      details: { code: 'PROTOCOL_MISMATCH', expectedProtocol: 4 },
    });
    expect((await client.closed).code).toBe(1002);
  });

  it('refuses a wrong token with the reference detail codes and closes with 1008', async () => {
    await start();
    const { client, response } = await connect({ token: 'wrong-token' });
    expect(response.ok).toBe(false);
    expect(response.error).toMatchObject({
      code: 'INVALID_REQUEST',
      message: expect.stringMatching(/^unauthorized: gateway token mismatch/),
      details: { code: 'AUTH_TOKEN_MISMATCH', authReason: 'token_mismatch', canRetryWithDeviceToken: false },
    });
    const closed = await client.closed;
    expect(closed.code).toBe(1008);
    expect(closed.reason).toMatch(/unauthorized/);
    await vi.waitFor(() => expect(gateway!.server.connectionCount).toBe(0));
  });

  it('refuses a missing token', async () => {
    await start();
    const { response } = await connect({ token: undefined });
    expect(response.error.details.code).toBe('AUTH_TOKEN_MISSING');
  });

  it('closes when the first frame is not a connect request', async () => {
    await start();
    const client = await FrameClient.open(gateway!.url);
    clients.push(client);
    await client.nextEvent('connect.challenge');
    const response = await client.request('health', {});
    expect(response.error.message).toMatch(/first request must be connect/);
    expect((await client.closed).code).toBe(1008);
  });

  it('closes a pre-connect frame above 64 KiB with 1009', async () => {
    await start();
    const client = await FrameClient.open(gateway!.url);
    clients.push(client);
    await client.nextEvent('connect.challenge');
    client.send({ type: 'req', id: 'x', method: 'connect', params: { pad: 'x'.repeat(70 * 1024) } });
    expect((await client.closed).code).toBe(1009);
  });

  it('closes a client that never connects when the handshake timeout passes', async () => {
    await start({ limits: { handshakeTimeoutMs: 50 } });
    const client = await FrameClient.open(gateway!.url);
    clients.push(client);
    expect(await client.closed).toEqual({ code: 1008, reason: 'handshake timeout' });
  });

  it('allows --no-auth on loopback', async () => {
    await start({ noAuth: true });
    const { response } = await connect({ token: undefined });
    expect(response.payload.snapshot.authMode).toBe('none');
  });

  describe('device identity', () => {
    const { publicKey, privateKey } = generateKeyPairSync('ed25519');
    const raw = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32);
    const deviceId = deviceIdForPublicKey(raw);
    const device =
      (token: string, tamper = false) =>
      (nonce: string) => {
        const signedAt = Date.now();
        const payload = deviceAuthPayload('v3', {
          deviceId,
          clientId: 'test',
          clientMode: 'cli',
          role: 'operator',
          scopes: ['operator.read'],
          signedAtMs: signedAt,
          token,
          nonce,
          platform: 'linux',
        });
        const signature = sign(null, Buffer.from(tamper ? `${payload}x` : payload), privateKey).toString(
          'base64url',
        );
        return { id: deviceId, publicKey: raw.toString('base64url'), signature, signedAt, nonce };
      };

    it('verifies the signature, issues a device token, and accepts it instead of the gateway token', async () => {
      await start();
      const first = await connect({ scopes: ['operator.read'], device: device(testToken) });
      const deviceToken = first.response.payload.auth.deviceToken as string;
      expect(deviceToken).toEqual(expect.any(String));
      expect(first.response.payload.auth.issuedAtMs).toEqual(expect.any(Number));

      const client = await FrameClient.open(gateway!.url);
      clients.push(client);
      const challenge = await client.nextEvent('connect.challenge');
      const response = await client.request('connect', {
        minProtocol: 4,
        maxProtocol: 4,
        client: { id: 'test', version: '1', platform: 'linux', mode: 'cli' },
        role: 'operator',
        scopes: ['operator.read'],
        auth: { deviceToken },
        device: device(deviceToken)(challenge.payload.nonce),
      });
      expect(response.ok).toBe(true);
      expect((await client.request('health', {})).ok).toBe(true);
    });

    it('refuses a bad signature with DEVICE_AUTH_SIGNATURE_INVALID', async () => {
      await start();
      const { response, client } = await connect({
        scopes: ['operator.read'],
        device: device(testToken, true),
      });
      expect(response.error.details.code).toBe('DEVICE_AUTH_SIGNATURE_INVALID');
      expect((await client.closed).code).toBe(1008);
    });

    it('refuses a signature over another nonce', async () => {
      await start();
      const { response } = await connect({
        scopes: ['operator.read'],
        device: () => device(testToken)('stale-nonce'),
      });
      expect(response.error.details.code).toBe('DEVICE_AUTH_NONCE_MISMATCH');
    });
  });
});

describe('OpenClaw requests', () => {
  it('answers health and status, echoing request ids', async () => {
    await start();
    const { client } = await connect();
    expect(await client.request('health', {}, 'abc')).toMatchObject({
      id: 'abc',
      ok: true,
      payload: { ok: true },
    });
    expect((await client.request('status')).payload).toMatchObject({
      ok: true,
      transcripts: 0,
      sessions: { count: 0, byAgent: [{ agentId: 'main', count: 0, recent: [] }] },
    });
  });

  it('answers unknown methods with INVALID_REQUEST and keeps the connection', async () => {
    await start();
    const { client } = await connect();
    const response = await client.request('no.such.method', {});
    expect(response.error).toMatchObject({
      code: 'INVALID_REQUEST',
      message: 'unknown method: no.such.method',
      retryable: false,
    });
    expect((await client.request('health')).ok).toBe(true);
  });

  it('ignores frames that are not JSON and answers malformed requests that carry an id', async () => {
    await start();
    const { client } = await connect();
    client.send('this is not json {');
    client.send({ type: 'req', id: 'bad-1' });
    const response = await client.next((frame) => frame.id === 'bad-1');
    expect(response.error.message).toMatch(/invalid request frame: method/);
    client.send({ type: 'req', id: 'again', method: 'connect', params: {} });
    expect((await client.next((frame) => frame.id === 'again')).error.message).toBe('already connected');
    expect((await client.request('health')).ok).toBe(true);
  });

  it('closes a frame above maxFrameBytes with 1009', async () => {
    await start({ limits: { maxFrameBytes: 128 * 1024 } });
    const { client } = await connect();
    client.send({ type: 'req', id: 'big', method: 'health', params: { pad: 'x'.repeat(200 * 1024) } });
    expect((await client.closed).code).toBe(1009);
  });

  it('answers a chat message above maxMessageBytes with PAYLOAD_TOO_LARGE and keeps the connection', async () => {
    await start({ limits: { maxMessageBytes: 1000 } });
    const { client } = await connect();
    const response = await client.request('chat.send', {
      sessionKey: 'main',
      message: 'x'.repeat(2000),
      idempotencyKey: 'k',
    });
    expect(response.error.code).toBe('PAYLOAD_TOO_LARGE');
    expect((await client.request('health')).ok).toBe(true);
  });

  it('gates methods by scope', async () => {
    await start();
    const { client } = await connect({ scopes: ['operator.read'] });
    const response = await client.request('chat.send', {
      sessionKey: 'main',
      message: 'hi',
      idempotencyKey: 'k',
    });
    expect(response.error).toMatchObject({
      code: 'FORBIDDEN',
      details: { code: 'MISSING_SCOPE', missingScope: 'operator.write', requiredScopes: ['operator.write'] },
    });
    expect((await client.request('chat.history', { sessionKey: 'main' })).ok).toBe(true);
    expect((await client.request('sessions.reset', { key: 'main' })).error.code).toBe('FORBIDDEN');
  });

  it('requires an idempotency key on chat.send', async () => {
    await start();
    const { client } = await connect();
    const response = await client.request('chat.send', { sessionKey: 'main', message: 'no key' });
    expect(response.error.code).toBe('INVALID_REQUEST');
    expect(response.error.message).toMatch(/^invalid chat\.send params: idempotencyKey/);
  });
});

describe('OpenClaw chat', () => {
  it('acks chat.send, streams agent and chat events (v4 deltaText) with per-connection seq, then final', async () => {
    await start({ chat: { reply: () => 'Hello world', deltas: 2 } });
    const { client } = await connect();
    const ack = await client.request('chat.send', {
      sessionKey: 'agent:main:s1',
      message: 'hi',
      idempotencyKey: 'idem-1',
    });
    expect(ack.payload).toEqual({ runId: 'idem-1', status: 'started' });
    const final = await client.nextEvent('chat', (payload) => payload.state === 'final');
    expect(final.payload).toMatchObject({
      runId: 'idem-1',
      sessionKey: 'agent:main:s1',
      agentId: 'main',
      state: 'final',
      stopReason: 'stop',
      message: { role: 'assistant', content: [{ type: 'text', text: 'Hello world' }] },
    });
    const events = client.frames.filter(
      (frame) => frame.type === 'event' && frame.event !== 'connect.challenge',
    );
    expect(events.map((frame) => frame.seq)).toEqual(events.map((_, index) => index + 1));
    const agentStreams = events
      .filter((frame) => frame.event === 'agent')
      .map((frame) => frame.payload.stream);
    expect(agentStreams).toEqual(['lifecycle', 'assistant', 'assistant', 'lifecycle']);
    const lifecycle = events
      .filter((frame) => frame.payload.stream === 'lifecycle')
      .map((frame) => frame.payload.data.phase);
    expect(lifecycle).toEqual(['start', 'end']);
    const deltas = events.filter((frame) => frame.event === 'chat' && frame.payload.state === 'delta');
    expect(deltas.map((frame) => frame.payload.deltaText).join('')).toBe('Hello world');
    expect(deltas.at(-1)!.payload.message.content[0].text).toBe('Hello world');
    const runSeqs = events.filter((frame) => frame.event === 'agent').map((frame) => frame.payload.seq);
    expect(runSeqs).toEqual([1, 2, 3, 4]);
  });

  it('sends v3 clients cumulative chat deltas without deltaText', async () => {
    await start({ chat: { reply: () => 'abcdef', deltas: 3 } });
    const { client } = await connect({ minProtocol: 3, maxProtocol: 3 });
    await client.request('chat.send', { sessionKey: 'main', message: 'hi', idempotencyKey: 'v3' });
    await client.nextEvent('chat', (payload) => payload.state === 'final');
    const deltas = client.frames.filter((frame) => frame.event === 'chat' && frame.payload.state === 'delta');
    expect(deltas.length).toBeGreaterThan(0);
    for (const delta of deltas) expect(delta.payload.deltaText).toBeUndefined();
    expect(deltas.at(-1)!.payload.message.content[0].text).toBe('abcdef');
  });

  it('answers a duplicate idempotency key with in_flight, and a finished one from the cache', async () => {
    await start({ chat: { holdRuns: true } });
    const { client } = await connect();
    const params = { sessionKey: 'main', message: 'once', idempotencyKey: 'dup' };
    expect((await client.request('chat.send', params)).payload).toEqual({ runId: 'dup', status: 'started' });
    expect((await client.request('chat.send', params)).payload).toEqual({
      runId: 'dup',
      status: 'in_flight',
    });
    gateway!.chat.releaseRun('dup');
    await client.nextEvent('chat', (payload) => payload.state === 'final');
    await vi.waitFor(async () => {
      expect((await client.request('chat.send', params)).payload).toEqual({
        runId: 'dup',
        status: 'ok',
        cached: true,
      });
    });
    expect(gateway!.chat.sent).toHaveLength(1);
  });

  it('sends tool stream events only to clients that declared tool-events', async () => {
    await start({ chat: { withTool: true } });
    const plain = await connect();
    const withTools = await connect({ caps: ['tool-events'] });
    await withTools.client.request('chat.history', { sessionKey: 'main' });
    await plain.client.request('chat.send', { sessionKey: 'main', message: 'hi', idempotencyKey: 't' });
    await plain.client.nextEvent('chat', (payload) => payload.state === 'final');
    await withTools.client.nextEvent('chat', (payload) => payload.state === 'final');
    const tools = (client: FrameClient) => client.frames.filter((frame) => frame.payload?.stream === 'tool');
    expect(tools(plain.client)).toHaveLength(0);
    expect(tools(withTools.client).map((frame) => frame.payload.data.phase)).toEqual(['start', 'end']);
    expect(tools(withTools.client)[0]!.payload.data).toMatchObject({ name: 'clock', toolCallId: 't1' });
  });

  it('delivers run events only to connections watching the session', async () => {
    await start();
    const sender = await connect();
    const watcher = await connect();
    const bystander = await connect();
    await watcher.client.request('chat.history', { sessionKey: 'agent:main:shared' });
    await sender.client.request('chat.send', {
      sessionKey: 'agent:main:shared',
      message: 'hi',
      idempotencyKey: 'w',
    });
    await watcher.client.nextEvent('chat', (payload) => payload.state === 'final');
    await sender.client.nextEvent('chat', (payload) => payload.state === 'final');
    expect((await bystander.client.request('health')).ok).toBe(true);
    expect(
      bystander.client.frames.filter(
        (frame) => frame.type === 'event' && frame.event !== 'connect.challenge',
      ),
    ).toHaveLength(0);
  });

  it('reports a failed run as a chat error event', async () => {
    await start({
      chat: { failWith: { code: 'PROVIDER_TIMEOUT', message: 'model timed out', retryable: true } },
    });
    const { client } = await connect();
    await client.request('chat.send', { sessionKey: 'main', message: 'hi', idempotencyKey: 'e' });
    const error = await client.nextEvent('chat', (payload) => payload.state === 'error');
    expect(error.payload).toMatchObject({ errorMessage: 'model timed out', errorKind: 'timeout' });
    const lifecycle = client.frames.filter((frame) => frame.payload?.stream === 'lifecycle').at(-1);
    expect(lifecycle!.payload.data).toMatchObject({ phase: 'error', error: 'model timed out' });
  });

  it('aborts with chat.abort and with a bare /stop', async () => {
    await start({ chat: { holdRuns: true } });
    const { client } = await connect();
    await client.request('chat.send', { sessionKey: 'main', message: 'long', idempotencyKey: 'a1' });
    await client.nextEvent('agent', (payload) => payload.data?.phase === 'start');
    const abort = await client.request('chat.abort', { sessionKey: 'main', runId: 'a1' });
    expect(abort.payload).toEqual({ ok: true, aborted: true, runIds: ['a1'] });
    expect((await client.nextEvent('chat', (payload) => payload.runId === 'a1')).payload.state).toBe(
      'aborted',
    );

    await client.request('chat.send', { sessionKey: 'main', message: 'long', idempotencyKey: 'a2' });
    await client.nextEvent('agent', (payload) => payload.runId === 'a2' && payload.data?.phase === 'start');
    const stop = await client.request('chat.send', {
      sessionKey: 'main',
      message: '/stop',
      idempotencyKey: 'a3',
    });
    expect(stop.payload).toEqual({ ok: true, aborted: true, runIds: ['a2'] });
  });

  it('returns history, injects notes, resets with /new', async () => {
    await start();
    const { client } = await connect();
    await client.request('chat.send', {
      sessionKey: 'main',
      message: 'remember Pixel',
      idempotencyKey: 'h1',
    });
    await client.nextEvent('chat', (payload) => payload.state === 'final');
    const inject = await client.request('chat.inject', {
      sessionKey: 'main',
      message: 'a note',
      label: 'ops',
    });
    expect(inject.payload).toMatchObject({ ok: true, memoryId: '3' });
    const history = await client.request('chat.history', { sessionKey: 'main', limit: 50 });
    expect(history.payload.sessionKey).toBe('agent:main:main');
    expect(history.payload.messages).toEqual([
      { role: 'user', content: 'remember Pixel', timestamp: expect.any(Number), memoryId: '1' },
      {
        role: 'assistant',
        content: [{ type: 'text', text: 'echo: remember Pixel' }],
        timestamp: expect.any(Number),
        memoryId: '2',
        runId: 'h1',
      },
      {
        role: 'assistant',
        content: [{ type: 'text', text: 'a note' }],
        timestamp: expect.any(Number),
        memoryId: '3',
      },
    ]);
    const truncated = await client.request('chat.history', { sessionKey: 'main', maxChars: 4 });
    expect(truncated.payload.messages[0]).toMatchObject({ content: 'reme…', truncated: true });
    const reset = await client.request('chat.send', {
      sessionKey: 'main',
      message: '/new',
      idempotencyKey: 'h2',
    });
    expect(reset.payload).toMatchObject({
      ok: true,
      reset: { sessionKey: 'agent:main:main', archived: true },
    });
    expect((await client.request('chat.history', { sessionKey: 'main' })).payload.messages).toEqual([]);
  });

  it('runs the agent method: accepted, the run events, then a second res with the final result', async () => {
    await start({ chat: { reply: () => 'Hello from agentd.' } });
    const { client } = await connect({ scopes: ['operator.write'] });
    client.send({
      type: 'req',
      id: 'agent-1',
      method: 'agent',
      params: {
        message: 'hello again',
        sessionKey: 'agent:main:t5',
        deliver: false,
        timeout: 30,
        idempotencyKey: 'run-9',
      },
    });
    const accepted = await client.next((frame) => frame.type === 'res' && frame.id === 'agent-1');
    expect(accepted.payload).toMatchObject({
      runId: 'run-9',
      sessionKey: 'agent:main:t5',
      agentId: 'main',
      status: 'accepted',
      acceptedAt: expect.any(Number),
    });
    const final = await client.next((frame) => frame.type === 'res' && frame.id === 'agent-1');
    expect(final.payload).toMatchObject({
      runId: 'run-9',
      status: 'ok',
      summary: 'completed',
      result: {
        payloads: [{ text: 'Hello from agentd.', mediaUrl: null }],
        meta: { aborted: false, stopReason: 'stop' },
      },
    });
    const order = client.frames.map((frame) =>
      frame.type === 'res'
        ? `res:${frame.payload.status}`
        : `${frame.event}:${frame.payload.state ?? frame.payload.stream}`,
    );
    expect(order.indexOf('chat:final')).toBeGreaterThan(order.indexOf('res:accepted'));
    expect(order.at(-1)).toBe('res:ok');
  });

  it('answers every session and memory method', async () => {
    await start();
    const { client } = await connect();
    await client.request('chat.send', {
      sessionKey: 'agent:main:s',
      message: 'topic cats',
      idempotencyKey: 's1',
    });
    await client.nextEvent('chat', (payload) => payload.state === 'final');
    const list = await client.request('sessions.list', {});
    expect(list.payload).toMatchObject({ count: 1, defaults: { mainSessionKey: 'agent:main:main' } });
    expect(list.payload.sessions[0]).toMatchObject({ key: 'agent:main:s', messageCount: 2 });
    const preview = await client.request('sessions.preview', {
      keys: ['agent:main:s', 'agent:main:none'],
      limit: 1,
    });
    expect(preview.payload.previews).toEqual([
      { key: 'agent:main:s', status: 'ok', items: [{ role: 'assistant', text: 'echo: topic cats' }] },
      { key: 'agent:main:none', status: 'missing', items: [] },
    ]);
    expect(
      (await client.request('sessions.patch', { key: 'agent:main:s', label: 'Cats' })).payload,
    ).toMatchObject({
      ok: true,
      entry: { label: 'Cats' },
    });
    expect((await client.request('sessions.compact', { key: 'agent:main:s' })).payload).toMatchObject({
      ok: true,
      compacted: true,
    });
    const query = await client.request('memory.query', {
      sessionKey: 'agent:main:s',
      topic: 'cats',
      kind: 'entry',
    });
    expect(query.payload).toMatchObject({ sessionKey: 'agent:main:s', topic: 'cats' });
    expect(query.payload.items).toHaveLength(2);
    const recall = await client.request('memory.recall', { sessionKey: 'agent:main:s', limit: 1 });
    expect(recall.payload.items).toEqual([
      expect.objectContaining({ kind: 'entry', content: 'echo: topic cats' }),
    ]);
    expect(
      (await client.request('sessions.reset', { key: 'agent:main:s', reason: 'new' })).payload,
    ).toMatchObject({
      ok: true,
      key: 'agent:main:s',
      archived: true,
    });
    expect((await client.request('sessions.delete', { key: 'agent:main:s' })).payload).toEqual({
      ok: true,
      key: 'agent:main:s',
      deleted: true,
    });
    expect((await client.request('sessions.reset', {})).error.message).toMatch(/key/);
    expect(gateway!.calls.map((call) => call.method)).toEqual([
      'sessions.list',
      'sessions.preview',
      'sessions.patch',
      'sessions.compact',
      'memory.query',
      'memory.recall',
      'sessions.reset',
      'sessions.delete',
    ]);
  });

  it('waits for a run with agent.wait', async () => {
    await start();
    const { client } = await connect();
    await client.request('chat.send', { sessionKey: 'main', message: 'x', idempotencyKey: 'w1' });
    const result = await client.request('agent.wait', { runId: 'w1' });
    expect(result.payload).toMatchObject({
      runId: 'w1',
      status: 'ok',
      runStatus: 'completed',
      text: 'echo: x',
      memoryId: '2',
    });
  });
});

describe('OpenClaw events and limits', () => {
  it('sends tick events on the advertised interval', async () => {
    await start({ limits: { tickIntervalMs: 30 } });
    const { client } = await connect();
    const tick = await client.nextEvent('tick');
    expect(tick.payload.ts).toEqual(expect.any(Number));
    expect(tick.seq).toBe(1);
    expect((await client.nextEvent('tick')).seq).toBe(2);
  });

  it('forwards registered bus events to clients holding the scope', async () => {
    await start({
      setup: (table) => {
        table.forwardBusEvent('system:error', 'system.error', { scopes: ['operator.admin'] });
      },
    });
    const reader = await connect({ scopes: ['operator.read'] });
    const admin = await connect({ scopes: ['operator.admin'] });
    expect(admin.response.payload.features.events).toContain('system.error');
    gateway!.bus.publish('system:error', { code: 'X', message: 'disk full', component: 'store' });
    const event = await admin.client.nextEvent('system.error');
    expect(event.payload).toMatchObject({
      code: 'X',
      message: 'disk full',
      component: 'store',
      ts: expect.any(Number),
    });
    expect((await reader.client.request('health')).ok).toBe(true);
    expect(reader.client.frames.some((frame) => frame.event === 'system.error')).toBe(false);
  });

  it('disconnects a client that stops reading once its queue passes maxBufferedBytes', async () => {
    const logger = createRecordingLogger();
    const big = 'y'.repeat(256 * 1024);
    await start({ limits: { maxBufferedBytes: 512 * 1024 }, logger });
    const { client } = await connect();
    await client.request('chat.history', { sessionKey: 'agent:main:flood' });
    (client.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    for (let index = 0; index < 200 && gateway!.server.connectionCount > 0; index++) {
      gateway!.bus.publish(
        'run:text-delta',
        { runId: 'flood', delta: big, text: big },
        { runId: 'flood', sessionKey: 'agent:main:flood' },
      );
    }
    await vi.waitFor(() => expect(gateway!.server.connectionCount).toBe(0));
    expect(logger.records.some((record) => record.message === 'gateway: slow consumer disconnected')).toBe(
      true,
    );
    (client.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    await client.closed;
  });

  it('refuses connections past maxConnections with 503', async () => {
    await start({ limits: { maxConnections: 2 } });
    await connect();
    await connect();
    const ws = new WebSocket(gateway!.url);
    const status = await new Promise<number>((resolve) =>
      ws.on('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0)),
    );
    expect(status).toBe(503);
  });

  it('refuses browsers from other origins and accepts the same host and configured origins', async () => {
    await start({ allowedOrigins: ['https://ui.example'] });
    const refused = new WebSocket(gateway!.url, { origin: 'https://evil.example' });
    const status = await new Promise<number>((resolve) =>
      refused.on('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0)),
    );
    expect(status).toBe(403);
    const same = await FrameClient.open(gateway!.url, { origin: `http://127.0.0.1:${gateway!.port}` });
    clients.push(same);
    await same.nextEvent('connect.challenge');
    const configured = await FrameClient.open(gateway!.url, { origin: 'https://ui.example' });
    clients.push(configured);
    await configured.nextEvent('connect.challenge');
  });

  it('serves GET /health and 404 JSON over HTTP', async () => {
    await start();
    const health = await fetch(`http://127.0.0.1:${gateway!.port}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok', version: 'test' });
    const full = await fetch(`http://127.0.0.1:${gateway!.port}/health`, {
      headers: { authorization: `Bearer ${testToken}` },
    });
    expect(await full.json()).toEqual({ ok: true, ts: 1, component: 'fake' });
    const missing = await fetch(`http://127.0.0.1:${gateway!.port}/nope`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
  });

  it('says shutdown and closes with 1001 on close()', async () => {
    const gw = await startTestGateway();
    const { client } = await connectOpenClaw(gw.url);
    const shutdown = client.nextEvent('shutdown');
    await gw.close();
    expect((await shutdown).payload.reason).toMatch(/shutting down/);
    expect((await client.closed).code).toBe(1001);
    expect(gw.server.connectionCount).toBe(0);
  });

  it('resolves a close() called while another runs only once every connection and the listener are gone', async () => {
    const gw = await startTestGateway();
    const { client } = await connectOpenClaw(gw.url);
    const first = gw.close();
    await gw.close();
    expect(gw.server.connectionCount).toBe(0);
    expect(gw.server.address()).toBeNull();
    expect((await client.closed).code).toBe(1001);
    await first;
  });
});
