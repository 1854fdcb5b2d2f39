import { afterEach, describe, expect, it } from 'vitest';
import {
  connectOpenClaw,
  FrameClient,
  fakeModel,
  startTestGateway,
  type TestGateway,
  testToken,
} from './helpers.js';

/**
 * The methods OpenClaw's own TUI and CLI call besides chat, checked field by field against what those
 * clients read (OpenClaw 2026.9.6's protocol schema: SessionsCreateResult, CommandEntry, ModelChoice,
 * QuestionListResult, TaskSuggestionsListResult, and the status summary `openclaw status --json` reads).
 */
describe('OpenClaw client methods', () => {
  let gateway: TestGateway | undefined;

  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
  });

  const start = async (options: Parameters<typeof startTestGateway>[0] = {}) => {
    gateway = await startTestGateway(options);
    return gateway;
  };

  it('sends the chat.send acknowledgement before any event of the run, even when the run ends first', async () => {
    const { url } = await start({ chat: { runBeforeAck: true, deltas: 2 } });
    const { client } = await connectOpenClaw(url, { caps: ['tool-events'] });
    // Where the gateway's ping falls among the frames: between the acknowledgement and the run's events.
    client.ws.on('ping', () => client.frames.push({ type: 'ping' }));
    await client.request('chat.history', { sessionKey: 'agent:main:fast' });
    await client.request('sessions.subscribe', {});
    const ack = await client.request('chat.send', {
      sessionKey: 'agent:main:fast',
      message: 'quick',
      idempotencyKey: 'fast-1',
    });
    expect(ack.payload).toEqual({ runId: 'fast-1', status: 'started' });
    await client.nextEvent('chat', (payload) => payload.state === 'final');
    await client.nextEvent('sessions.changed', (payload) => payload.phase === 'end');

    const ackIndex = client.frames.findIndex((frame) => frame.type === 'res' && frame.id === ack.id);
    const runFrames = client.frames
      .map((frame, index) => ({ frame, index }))
      .filter(({ frame }) => frame.type === 'event' && frame.payload?.runId === 'fast-1');
    const names = runFrames.map(
      ({ frame }) => `${frame.event}:${frame.payload.stream ?? frame.payload.state ?? frame.payload.phase}`,
    );
    expect(names[0]).toBe('agent:lifecycle');
    expect(names).toContain('sessions.changed:start');
    expect(names).toContain('chat:final');
    expect(names.at(-1)).toBe('sessions.changed:end');
    const pingIndex = client.frames.findIndex((frame) => frame.type === 'ping');
    expect(ackIndex).toBeGreaterThan(-1);
    expect(pingIndex).toBeGreaterThan(ackIndex);
    expect(runFrames.every(({ index }) => index > pingIndex)).toBe(true);
    // The held events keep their order and their per-connection sequence numbers stay gapless.
    const seqs = client.frames
      .filter((frame) => frame.type === 'event' && frame.event !== 'connect.challenge')
      .map((frame) => frame.seq);
    expect(seqs).toEqual(seqs.map((_, index) => seqs[0] + index));
  });

  it('still delivers held events to a client that never answers pings', async () => {
    const { url } = await start({ chat: { runBeforeAck: true } });
    const client = await FrameClient.open(url, { autoPong: false });
    await client.nextEvent('connect.challenge');
    await client.request('connect', {
      minProtocol: 4,
      maxProtocol: 4,
      client: { id: 'test', mode: 'cli' },
      role: 'operator',
      scopes: ['operator.read', 'operator.write'],
      auth: { token: testToken },
    });
    const ack = await client.request('chat.send', {
      sessionKey: 'agent:main:nopong',
      message: 'hi',
      idempotencyKey: 'np-1',
    });
    expect(ack.payload.status).toBe('started');
    const final = await client.nextEvent('chat', (payload) => payload.state === 'final');
    expect(client.frames.indexOf(final)).toBeGreaterThan(client.frames.indexOf(ack));
    client.close();
  });

  it('holds run events only while the run-starting request is unanswered', async () => {
    const { url } = await start({ chat: { runBeforeAck: true } });
    const { client } = await connectOpenClaw(url);
    // A refused chat.send releases what was held, too: the next run's events still arrive.
    const refused = await client.request('chat.send', {
      sessionKey: 'agent:main:hold',
      message: '   ',
      idempotencyKey: 'empty',
    });
    expect(refused.error.code).toBe('INVALID_REQUEST');
    await client.request('chat.send', {
      sessionKey: 'agent:main:hold',
      message: 'hi',
      idempotencyKey: 'h-1',
    });
    const final = await client.nextEvent('chat', (payload) => payload.state === 'final');
    expect(final.payload.message.content[0].text).toBe('echo: hi');
  });

  it('sessions.subscribe streams sessions.changed for every session until sessions.unsubscribe', async () => {
    const { url } = await start();
    const { client: watcher } = await connectOpenClaw(url, { scopes: ['operator.read'] });
    const { client: sender } = await connectOpenClaw(url);
    expect((await watcher.request('sessions.subscribe', {})).payload).toEqual({ subscribed: true });

    await sender.request('chat.send', { sessionKey: 'agent:main:a', message: 'one', idempotencyKey: 'sc-1' });
    const started = await watcher.nextEvent('sessions.changed', (payload) => payload.phase === 'start');
    expect(started.payload).toMatchObject({
      sessionKey: 'agent:main:a',
      key: 'agent:main:a',
      agentId: 'main',
      reason: 'agent.run.started',
      runId: 'sc-1',
    });
    const ended = await watcher.nextEvent('sessions.changed', (payload) => payload.phase === 'end');
    expect(ended.payload).toMatchObject({ reason: 'agent.run.ended', runId: 'sc-1' });
    expect(typeof ended.payload.updatedAt).toBe('number');

    await sender.request('chat.send', {
      sessionKey: 'agent:main:a',
      message: '/new',
      idempotencyKey: 'sc-2',
    });
    const reset = await watcher.nextEvent('sessions.changed', (payload) => payload.reason === 'new');
    expect(reset.payload).toMatchObject({ sessionKey: 'agent:main:a', sessionId: expect.any(String) });

    expect((await watcher.request('sessions.unsubscribe', {})).payload).toEqual({ subscribed: false });
    await sender.request('chat.send', { sessionKey: 'agent:main:a', message: 'two', idempotencyKey: 'sc-3' });
    await gateway!.chat.service.wait('sc-3');
    // A round trip after the run: had an event been sent, it would have arrived before this answer.
    await watcher.request('health');
    expect(
      watcher.frames.some((frame) => frame.event === 'sessions.changed' && frame.payload.runId === 'sc-3'),
    ).toBe(false);
  });

  it('tells subscribers about patched and deleted sessions', async () => {
    const { url } = await start();
    const { client } = await connectOpenClaw(url);
    await client.request('sessions.subscribe', {});
    await client.request('sessions.create', { key: 'agent:main:gone' });
    await client.request('sessions.patch', { key: 'agent:main:gone', label: 'Gone soon' });
    const patched = await client.nextEvent('sessions.changed', (payload) => payload.reason === 'patch');
    expect(patched.payload).toMatchObject({ key: 'agent:main:gone', agentId: 'main' });
    await client.request('sessions.delete', { key: 'agent:main:gone' });
    const deleted = await client.nextEvent('sessions.changed', (payload) => payload.reason === 'delete');
    expect(deleted.payload).toMatchObject({ key: 'agent:main:gone', agentId: 'main' });
  });

  it('sessions.subscribe with list parameters answers the first roster as well', async () => {
    const { url } = await start();
    const { client } = await connectOpenClaw(url);
    await client.request('chat.send', { sessionKey: 'agent:main:r', message: 'x', idempotencyKey: 'r-1' });
    await gateway!.chat.service.wait('r-1');
    const response = await client.request('sessions.subscribe', { limit: 10 });
    expect(response.payload.subscribed).toBe(true);
    expect(response.payload.list.sessions.map((row: { key: string }) => row.key)).toEqual(['agent:main:r']);
    expect(response.payload.list.defaults).toMatchObject({ model: fakeModel.id, modelProvider: 'scripted' });
  });

  it('sessions.describe answers null for an unknown key and a row with its model for a known one', async () => {
    const { url } = await start();
    const { client } = await connectOpenClaw(url);
    const missing = await client.request('sessions.describe', { key: 'agent:main:nobody' });
    expect(missing.payload).toEqual({
      key: 'agent:main:nobody',
      session: null,
      defaults: {
        defaultAgentId: 'main',
        mainKey: 'main',
        mainSessionKey: 'agent:main:main',
        modelProvider: 'scripted',
        model: 'scripted-test',
        contextTokens: 32_768,
      },
    });
    await client.request('chat.send', { sessionKey: 'main', message: 'hello', idempotencyKey: 'd-1' });
    await gateway!.chat.service.wait('d-1');
    // A short key belongs to the default agent (or to `agentId` when given).
    const known = await client.request('sessions.describe', { key: 'main' });
    expect(known.payload.session).toMatchObject({
      key: 'agent:main:main',
      sessionId: expect.any(String),
      agentId: 'main',
      kind: 'direct',
      modelProvider: 'scripted',
      model: 'scripted-test',
      contextTokens: 32_768,
      updatedAt: expect.any(Number),
    });
    const bad = await client.request('sessions.describe', { key: 'agent:main' });
    expect(bad.error.code).toBe('INVALID_REQUEST');
    expect((await client.request('sessions.describe', {})).error.code).toBe('INVALID_REQUEST');
  });

  it('sessions.create opens a session once, labels it, and tells subscribers', async () => {
    const { url } = await start();
    const { client } = await connectOpenClaw(url);
    await client.request('sessions.subscribe', {});
    const created = await client.request('sessions.create', { key: 'agent:main:fresh', label: 'Fresh' });
    expect(created.payload).toMatchObject({
      ok: true,
      key: 'agent:main:fresh',
      sessionId: expect.any(String),
      created: true,
      entry: { key: 'agent:main:fresh', label: 'Fresh', displayName: 'Fresh', model: 'scripted-test' },
    });
    const changed = await client.nextEvent('sessions.changed', (payload) => payload.reason === 'create');
    expect(changed.payload).toMatchObject({ key: 'agent:main:fresh', sessionId: created.payload.sessionId });
    const again = await client.request('sessions.create', { key: 'agent:main:fresh' });
    expect(again.payload).toMatchObject({ created: false, sessionId: created.payload.sessionId });

    // Without a key, a new one under the agent.
    const generated = await client.request('sessions.create', { agentId: 'main' });
    expect(generated.payload.key).toMatch(/^agent:main:session-[0-9a-f-]{36}$/);

    const { client: reader } = await connectOpenClaw(url, { scopes: ['operator.read'] });
    const refused = await reader.request('sessions.create', { key: 'agent:main:nope' });
    expect(refused.error).toMatchObject({ code: 'FORBIDDEN' });
    const badLabel = await client.request('sessions.create', { key: 'x', label: 'y'.repeat(201) });
    expect(badLabel.error.code).toBe('INVALID_REQUEST');
  });

  it('lists the chat commands agentd answers, and its models', async () => {
    const { url } = await start();
    const { client } = await connectOpenClaw(url);
    const commands = (await client.request('commands.list', {})).payload.commands;
    expect(commands.map((command: { name: string }) => command.name)).toEqual(['new', 'reset', 'stop']);
    for (const command of commands) {
      expect(command).toEqual({
        name: command.name,
        textAliases: [`/${command.name}`],
        description: expect.any(String),
        category: 'session',
        source: 'native',
        scope: 'text',
        acceptsArgs: false,
      });
    }
    expect((await client.request('commands.list', { scope: 'native' })).payload).toEqual({ commands: [] });
    expect((await client.request('commands.list', { scope: 'bogus' })).error.code).toBe('INVALID_REQUEST');

    expect((await client.request('models.list', {})).payload).toEqual({
      models: [
        {
          id: 'scripted-test',
          name: 'scripted-test',
          provider: 'scripted',
          contextWindow: 32_768,
          local: true,
          supportsTools: true,
          input: ['text'],
        },
      ],
    });
  });

  it('answers the queues agentd does not have as empty, in the shapes the TUI reads', async () => {
    const { url } = await start();
    const { client } = await connectOpenClaw(url, { scopes: ['operator.read'] });
    expect((await client.request('question.list', {})).payload).toEqual({ questions: [] });
    expect((await client.request('plugin.approval.list', {})).payload).toEqual([]);
    expect((await client.request('taskSuggestions.list', {})).payload).toEqual({ suggestions: [] });
  });

  it('status carries the summary and the cliProjection openclaw status reads, from agentd data', async () => {
    const { url } = await start();
    const { client } = await connectOpenClaw(url);
    await client.request('chat.send', { sessionKey: 'agent:main:s1', message: 'x', idempotencyKey: 's-1' });
    await gateway!.chat.service.wait('s-1');
    const plain = (await client.request('status', {})).payload;
    expect(plain.cliProjection).toBeUndefined();
    const status = (await client.request('status', { includeCliProjection: true })).payload;
    expect(status).toMatchObject({
      ok: true,
      heartbeat: { defaultAgentId: 'main', agents: [] },
      channelSummary: [],
      tasks: {
        total: 5,
        active: 2,
        terminal: 3,
        failures: 1,
        byStatus: { queued: 1, running: 1, succeeded: 2, failed: 1, timed_out: 0, cancelled: 0, lost: 0 },
      },
      sessions: {
        count: 1,
        defaults: { model: 'scripted/scripted-test', contextTokens: 32_768 },
        recent: [{ agentId: 'main', key: 'agent:main:s1', kind: 'direct' }],
        byAgent: [{ agentId: 'main', count: 1, recent: [{ key: 'agent:main:s1' }] }],
      },
      cliProjection: {
        agents: { defaultId: 'main', selectionRequired: false, rows: [{ id: 'main', name: 'Main' }] },
        updateChannel: null,
        memoryPlugin: { enabled: false, slot: null },
      },
    });
    expect((await client.request('status', { includeCliProjection: 'yes' })).error.code).toBe(
      'INVALID_REQUEST',
    );
  });
});
