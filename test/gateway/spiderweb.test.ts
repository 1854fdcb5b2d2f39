import { afterEach, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { z } from 'zod';
import { FrameClient, startTestGateway, type TestGateway, testToken } from './helpers.js';

let gateway: TestGateway | undefined;
const clients: FrameClient[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) client.ws.terminate();
  await gateway?.close();
  gateway = undefined;
});

function streamUrl(agentId = 'main', query = '') {
  return `${gateway!.url}/v1/agents/${agentId}/stream${query}`;
}

async function open(query = '?session=s1', agentId = 'main') {
  const client = await FrameClient.open(streamUrl(agentId, query), {
    headers: { authorization: `Bearer ${testToken}` },
  });
  clients.push(client);
  const ack = await client.next((frame) => frame.type === 'session.ack');
  return { client, ack };
}

function upgradeStatus(url: string, options: WebSocket.ClientOptions = {}): Promise<number> {
  const ws = new WebSocket(url, options);
  return new Promise((resolve) =>
    ws.on('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0)),
  );
}

describe('Spiderweb flat protocol', () => {
  it('acks with sessionKey, agentId and capabilities, and answers ping', async () => {
    gateway = await startTestGateway();
    const { client, ack } = await open('?session=s1', 'coder');
    expect(ack).toEqual({
      type: 'session.ack',
      sessionKey: 'agent:coder:s1',
      agentId: 'coder',
      capabilities: expect.arrayContaining(['stream', 'memory.query', 'memory.recall']),
    });
    client.send({ type: 'ping', id: 'p1' });
    expect(await client.next((frame) => frame.type === 'pong')).toEqual({
      type: 'pong',
      timestamp: expect.any(Number),
      request: 'p1',
    });
  });

  it('uses the main session when none is given and accepts the legacy session parameter names', async () => {
    gateway = await startTestGateway();
    expect((await open('')).ack.sessionKey).toBe('agent:main:main');
    expect((await open('?session_id=abc')).ack.sessionKey).toBe('agent:main:abc');
    expect((await open('?sessionKey=agent:main:full')).ack.sessionKey).toBe('agent:main:full');
  });

  it('authenticates with a Bearer header or ?token=, and refuses anything else with 401', async () => {
    gateway = await startTestGateway();
    const viaQuery = await FrameClient.open(streamUrl('main', `?token=${testToken}`));
    clients.push(viaQuery);
    await viaQuery.next((frame) => frame.type === 'session.ack');
    expect(await upgradeStatus(streamUrl('main', '?token=wrong'))).toBe(401);
    expect(await upgradeStatus(streamUrl())).toBe(401);
    expect(await upgradeStatus(streamUrl('bad%20id', `?token=${testToken}`))).toBe(400);
    expect(await upgradeStatus(streamUrl('main', `?token=${testToken}&session=agent:other:x`))).toBe(400);
    expect(await upgradeStatus(`${gateway.url}/v2/other`)).toBe(404);
  });

  it('answers chat.send and session.send with session.receive carrying memoryId and the request id', async () => {
    gateway = await startTestGateway();
    const { client } = await open();
    client.send({ type: 'chat.send', id: 'm1', content: 'hello', extraField: true });
    expect(await client.next((frame) => frame.type === 'session.receive')).toEqual({
      type: 'session.receive',
      content: 'echo: hello',
      memoryId: 2,
      request: 'm1',
    });
    client.send({ type: 'session.send', text: 'again' });
    const second = await client.next((frame) => frame.type === 'session.receive');
    expect(second).toMatchObject({
      content: 'echo: again',
      memoryId: 4,
      request: expect.stringMatching(/^.{16}$/),
    });
    expect(gateway.chat.sent.map((sent) => sent.sessionKey)).toEqual(['agent:main:s1', 'agent:main:s1']);
  });

  it('sends no deltas to a legacy client and session.delta to one that declared stream', async () => {
    gateway = await startTestGateway({ chat: { reply: () => 'one two three', deltas: 3 } });
    const legacy = await open('?session=a');
    const streaming = await open('?session=b&capabilities=stream');
    legacy.client.send({ type: 'chat.send', id: 'l', content: 'hi' });
    streaming.client.send({ type: 'chat.send', id: 's', content: 'hi' });
    await legacy.client.next((frame) => frame.type === 'session.receive');
    await streaming.client.next((frame) => frame.type === 'session.receive');
    expect(legacy.client.frames.map((frame) => frame.type)).toEqual(['session.ack', 'session.receive']);
    const deltas = streaming.client.frames.filter((frame) => frame.type === 'session.delta');
    expect(deltas.length).toBe(3);
    expect(deltas.map((frame) => frame.delta).join('')).toBe('one two three');
    expect(deltas[0]).toMatchObject({ request: 's', sessionKey: 'agent:main:b' });
  });

  it('lets a client declare capabilities with a session.capabilities message', async () => {
    gateway = await startTestGateway({ chat: { withTool: true } });
    const { client } = await open();
    client.send({ type: 'session.capabilities', id: 'c', capabilities: ['tool-events'] });
    expect(await client.next((frame) => frame.type === 'session.capabilities')).toEqual({
      type: 'session.capabilities',
      request: 'c',
      capabilities: ['tool-events'],
    });
    client.send({ type: 'chat.send', id: 'm', content: 'what time' });
    expect(await client.next((frame) => frame.type === 'tool.event')).toMatchObject({
      request: 'm',
      phase: 'start',
      toolName: 'clock',
    });
    await client.next((frame) => frame.type === 'session.receive');
  });

  it('resets with /new and with session.reset {archive, reason}', async () => {
    gateway = await startTestGateway();
    const { client } = await open();
    client.send({ type: 'chat.send', id: 'n1', content: 'remember this' });
    await client.next((frame) => frame.type === 'session.receive');
    client.send({ type: 'chat.send', id: 'n2', content: '/new' });
    expect(await client.next((frame) => frame.type === 'session.new')).toEqual({
      type: 'session.new',
      request: 'n2',
      sessionKey: 'agent:main:s1',
      archived: true,
    });
    client.send({ type: 'session.reset', id: 'n3', archive: false, reason: 'cleanup' });
    expect(await client.next((frame) => frame.type === 'session.reset')).toEqual({
      type: 'session.reset',
      request: 'n3',
      sessionKey: 'agent:main:s1',
      archived: false,
    });
    expect(
      gateway.calls.filter((call) => call.method === 'sessions.reset').map((call) => call.input),
    ).toEqual([
      { sessionKey: 'agent:main:s1', reason: 'new', archive: true },
      { sessionKey: 'agent:main:s1', reason: 'reset', archive: false },
    ]);
  });

  it('answers memory.query (topic null when absent) and memory.recall with the reference item shapes', async () => {
    gateway = await startTestGateway();
    const { client } = await open();
    client.send({ type: 'chat.send', id: 'q0', content: 'cats are great' });
    await client.next((frame) => frame.type === 'session.receive');
    client.send({ type: 'memory.query', id: 'q1', memoryIds: [1], include_archived: false });
    const query = await client.next((frame) => frame.type === 'memory.query');
    expect(query).toEqual({
      type: 'memory.query',
      request: 'q1',
      sessionKey: 'agent:main:s1',
      topic: null,
      items: [
        {
          kind: 'entry',
          source: 'ram',
          id: 1,
          role: 'user',
          state: 'active',
          related_to: null,
          content: 'cats are great',
        },
      ],
    });
    expect(gateway.calls.find((call) => call.method === 'memory.query')!.input).toMatchObject({
      memoryIds: ['1'],
      includeArchived: false,
      kind: 'all',
    });
    client.send({ type: 'memory.recall', id: 'q2', limit: 1, include_full: true });
    const recall = await client.next((frame) => frame.type === 'memory.recall');
    expect(recall).toMatchObject({
      request: 'q2',
      items: [{ kind: 'entry', content: 'echo: cats are great' }],
    });
    expect(gateway.calls.find((call) => call.method === 'memory.recall')!.input).toMatchObject({
      limit: 1,
      includeFull: true,
    });
    client.send({ type: 'memory.recall', id: 'q3', limit: 500 });
    expect(await client.next((frame) => frame.type === 'error')).toMatchObject({
      code: 'invalid_request',
      request: 'q3',
    });
  });

  it('says unsupported for /goal, agent.control and agent_spawn_request until a subsystem registers them', async () => {
    gateway = await startTestGateway();
    const { client } = await open();
    client.send({ type: 'chat.send', id: 'g1', content: '/goal write a report' });
    expect(await client.next((frame) => frame.type === 'error')).toMatchObject({
      code: 'unsupported',
      request: 'g1',
    });
    client.send({ type: 'agent.control', id: 'g2', action: 'pause' });
    expect(await client.next((frame) => frame.type === 'error')).toMatchObject({
      code: 'unsupported',
      request: 'g2',
    });
    client.send({ type: 'agent_spawn_request', id: 'g3', agent_config: { name: 'a' } });
    expect(await client.next((frame) => frame.type === 'error')).toMatchObject({
      code: 'unsupported',
      request: 'g3',
    });
  });

  it('routes /goal, agent.control and agent_spawn_request to the methods once registered', async () => {
    const controls: unknown[] = [];
    gateway = await startTestGateway({
      setup: (table) => {
        table.register('agent.control', {
          scopes: ['operator.write'],
          params: z.object({
            sessionKey: z.string(),
            agentId: z.string(),
            action: z.string(),
            goal: z.string().optional(),
          }),
          handler: async (params) => {
            controls.push(params);
            return { phase: 'workers.running' };
          },
        });
        table.register('agents.spawn', {
          scopes: ['operator.admin'],
          params: z.object({ name: z.string(), role: z.string(), cliBackend: z.string().optional() }),
          handler: async (params) => ({ agentId: `agent-${params.name}` }),
        });
      },
    });
    const { client } = await open();
    client.send({ type: 'chat.send', id: 'g1', content: '/goal write a report' });
    expect(await client.next((frame) => frame.type === 'agent.control')).toEqual({
      type: 'agent.control',
      request: 'g1',
      sessionKey: 'agent:main:s1',
      phase: 'workers.running',
    });
    client.send({ type: 'agent.control', id: 'g2', action: 'pause' });
    await client.next((frame) => frame.type === 'agent.control' && frame.request === 'g2');
    expect(controls).toEqual([
      { sessionKey: 'agent:main:s1', agentId: 'main', action: 'goal', goal: 'write a report' },
      { sessionKey: 'agent:main:s1', agentId: 'main', action: 'pause' },
    ]);
    client.send({
      type: 'agent_spawn_request',
      id: 'g3',
      agent_config: {
        name: 'scout',
        role: 'research',
        cli_backend: 'claude',
        initial_position: { x: 1, y: 2 },
      },
    });
    expect(await client.next((frame) => frame.type === 'agent_spawn_response')).toMatchObject({
      request: 'g3',
      agent_id: 'agent-scout',
    });
  });

  it('ignores unknown types and fields, and reports envelopes it cannot read', async () => {
    gateway = await startTestGateway();
    const { client } = await open();
    client.send({ type: 'future.thing', id: 'u1', whatever: [1, 2] });
    client.send('not json');
    expect(await client.next((frame) => frame.type === 'error')).toMatchObject({
      code: 'invalid_envelope',
      request: null,
    });
    client.send({ type: 'chat.send', id: 'e1' });
    expect(await client.next((frame) => frame.type === 'error')).toMatchObject({
      code: 'missing_content',
      request: 'e1',
    });
    client.send({ type: 'ping', id: 'after' });
    await client.next((frame) => frame.type === 'pong');
    expect(client.frames.some((frame) => frame.request === 'u1')).toBe(false);
  });

  it('reports a failed run as an error with the request id', async () => {
    gateway = await startTestGateway({
      chat: { failWith: { code: 'PROVIDER_TIMEOUT', message: 'model timed out', retryable: true } },
    });
    const { client } = await open();
    client.send({ type: 'chat.send', id: 'f1', content: 'hi' });
    expect(await client.next((frame) => frame.type === 'error')).toEqual({
      type: 'error',
      code: 'provider_timeout',
      message: 'model timed out',
      request: 'f1',
    });
  });

  it('forwards legacy events to everyone and additive events only to clients that declared them', async () => {
    gateway = await startTestGateway({
      setup: (table) => {
        table.forwardBusEvent('system:error', 'agent.progress', { spiderweb: 'legacy' });
        table.forwardBusEvent('store:degraded', 'agent.blocked', { spiderweb: 'additive' });
      },
    });
    const legacy = await open('?session=x');
    const modern = await open('?session=x&capabilities=agent.blocked');
    gateway.bus.publish('store:degraded', { reason: 'disk' }, { sessionKey: 'agent:main:x' });
    gateway.bus.publish(
      'system:error',
      { code: 'C', message: 'm', component: 'planner' },
      { sessionKey: 'agent:main:x' },
    );
    expect(await modern.client.next((frame) => frame.type === 'agent.blocked')).toMatchObject({
      reason: 'disk',
      sessionKey: 'agent:main:x',
    });
    await modern.client.next((frame) => frame.type === 'agent.progress');
    await legacy.client.next((frame) => frame.type === 'agent.progress');
    expect(legacy.client.frames.some((frame) => frame.type === 'agent.blocked')).toBe(false);
  });

  it('closes all Spiderweb sockets on shutdown', async () => {
    gateway = await startTestGateway();
    const { client } = await open();
    await gateway.close();
    expect((await client.closed).code).toBe(1001);
    await vi.waitFor(() => expect(gateway!.server.connectionCount).toBe(0));
  });
});
