import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOpenClaw, jsonOf, runOpenClaw } from '../helpers/openclaw.js';
import { startRuntime } from '../runtime/helpers.js';
import { startTestGateway, type TestGateway, testToken } from './helpers.js';

const { bin, reason } = findOpenClaw();
if (!bin) console.log(`skipping the openclaw CLI test: ${reason}`);

const commandTimeoutMs = 90_000;

describe.skipIf(!bin)('the real openclaw CLI against agentd', () => {
  let gateway: TestGateway;
  let home: string;

  beforeAll(async () => {
    gateway = await startTestGateway({ chat: { reply: (text) => `agentd heard: ${text}`, deltas: 3 } });
    // The CLI keeps device identity and config under $HOME; give it a throwaway one.
    home = mkdtempSync(join(tmpdir(), 'agentd-openclaw-home-'));
  });

  afterAll(async () => {
    await gateway?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  const openclaw = (args: string[], env: Record<string, string> = {}) =>
    runOpenClaw(bin as string, args, { home, env, timeoutMs: commandTimeoutMs });
  const json = jsonOf;
  const callArgs = (method: string, params?: unknown) => [
    'gateway',
    'call',
    method,
    '--url',
    gateway.url,
    '--token',
    testToken,
    '--json',
    ...(params === undefined ? [] : ['--params', JSON.stringify(params)]),
  ];

  it(
    'gateway call health',
    async () => {
      expect(json(await openclaw(callArgs('health')))).toEqual({ ok: true, ts: 1, component: 'fake' });
    },
    commandTimeoutMs,
  );

  it(
    'gateway call chat.send --expect-final, then chat.history shows the reply',
    async () => {
      const ack = json(
        await openclaw([
          ...callArgs('chat.send', {
            sessionKey: 'agent:main:cli',
            message: 'hello from the CLI',
            idempotencyKey: 'cli-1',
          }),
          '--expect-final',
        ]),
      );
      expect(ack).toEqual({ runId: 'cli-1', status: 'started' });
      const result = await gateway.chat.service.wait('cli-1');
      expect(result.text).toBe('agentd heard: hello from the CLI');

      const history = json(
        await openclaw(callArgs('chat.history', { sessionKey: 'agent:main:cli', limit: 10 })),
      );
      expect(history.sessionKey).toBe('agent:main:cli');
      expect(history.messages.map((message: { role: string }) => message.role)).toEqual([
        'user',
        'assistant',
      ]);
      expect(history.messages[1].content).toEqual([
        { type: 'text', text: 'agentd heard: hello from the CLI' },
      ]);
    },
    commandTimeoutMs * 2,
  );

  it(
    'openclaw agent --session-key --message prints the reply (and its --json result)',
    async () => {
      const env = { OPENCLAW_GATEWAY_URL: gateway.url, OPENCLAW_GATEWAY_TOKEN: testToken };
      const text = await openclaw(
        ['agent', '--session-key', 'agent:main:cli-agent', '--message', 'what is up'],
        env,
      );
      expect(text).toContain('agentd heard: what is up');
      const result = json(
        await openclaw(
          ['agent', '--session-key', 'agent:main:cli-agent', '--message', 'again', '--json'],
          env,
        ),
      );
      expect(result).toMatchObject({
        status: 'ok',
        summary: 'completed',
        result: { payloads: [{ text: 'agentd heard: again', mediaUrl: null }] },
      });
    },
    commandTimeoutMs * 2,
  );

  it(
    'openclaw status --json reports agentd reachable, with its sessions per agent and its agents',
    async () => {
      await gateway.chat.service.send({
        sessionKey: 'agent:main:status',
        agentId: 'main',
        text: 'hi',
        idempotencyKey: 'status-1',
        source: { protocol: 'openclaw', connId: 'test', clientId: 'test' },
      });
      await gateway.chat.service.wait('status-1');
      // `openclaw status` reads the gateway it should ask from its config file.
      const statusHome = mkdtempSync(join(tmpdir(), 'agentd-openclaw-status-'));
      try {
        mkdirSync(join(statusHome, '.openclaw'));
        writeFileSync(
          join(statusHome, '.openclaw', 'openclaw.json'),
          JSON.stringify({ gateway: { mode: 'remote', remote: { url: gateway.url, token: testToken } } }),
        );
        const status = json(
          await runOpenClaw(bin as string, ['status', '--json'], {
            home: statusHome,
            timeoutMs: commandTimeoutMs,
          }),
        );
        expect(status.gateway).toMatchObject({ reachable: true, url: gateway.url });
        expect(status.agents).toMatchObject({
          defaultId: 'main',
          agents: [{ id: 'main', name: 'Main', sessionsCount: expect.any(Number) }],
        });
        expect(status.sessions.byAgent[0]).toMatchObject({ agentId: 'main' });
        expect(status.sessions.recent.map((row: { key: string }) => row.key)).toContain('agent:main:status');
        expect(status.tasks).toMatchObject({ total: 5, active: 2 });
      } finally {
        rmSync(statusHome, { recursive: true, force: true });
      }
    },
    commandTimeoutMs,
  );

  it(
    'gateway call models.list and commands.list answer agentd catalogues',
    async () => {
      expect(json(await openclaw(callArgs('models.list', {}))).models).toEqual([
        expect.objectContaining({ id: 'scripted-test', provider: 'scripted', contextWindow: 32_768 }),
      ]);
      const commands = json(await openclaw(callArgs('commands.list', {}))).commands;
      expect(commands.map((command: { name: string }) => command.name)).toEqual(['new', 'reset', 'stop']);
    },
    commandTimeoutMs * 2,
  );
});

describe.skipIf(!bin)('the real openclaw CLI against a running agentd (local model)', () => {
  let started: Awaited<ReturnType<typeof startRuntime>>;
  let home: string;

  beforeAll(async () => {
    started = await startRuntime();
    home = mkdtempSync(join(tmpdir(), 'agentd-openclaw-home-'));
  });

  afterAll(async () => {
    await started?.runtime.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  const call = async (method: string, params?: unknown) =>
    jsonOf(
      await runOpenClaw(
        bin as string,
        [
          'gateway',
          'call',
          method,
          '--url',
          started.url,
          '--token',
          started.runtime.state.token,
          '--json',
          ...(params === undefined ? [] : ['--params', JSON.stringify(params)]),
        ],
        { home, timeoutMs: commandTimeoutMs },
      ),
    );

  it(
    'models.list, logs.tail and channels.status answer with agentd data',
    async () => {
      expect((await call('models.list', {})).models).toEqual([
        expect.objectContaining({ id: 'agentd-local', provider: 'local', local: true }),
      ]);
      const logs = await call('logs.tail', { limit: 20 });
      expect(logs.lines.length).toBeGreaterThan(0);
      expect(logs.lines.join('\n')).not.toContain(started.runtime.state.token);
      expect(await call('channels.status', {})).toMatchObject({ channelOrder: [], channels: {} });
    },
    commandTimeoutMs * 3,
  );

  it(
    'cron.add, cron.list, cron.run and cron.remove drive agentd scheduler; the run is a work item',
    async () => {
      const job = await call('cron.add', {
        name: 'cli job',
        schedule: { kind: 'every', everyMs: 3_600_000 },
        payload: { kind: 'task', description: 'Check the inbox.' },
      });
      expect(job).toMatchObject({ name: 'cli job', sessionKey: 'agent:main:main', enabled: true });
      expect((await call('cron.list', {})).jobs.map((listed: { id: string }) => listed.id)).toEqual([job.id]);
      const ran = await call('cron.run', { id: job.id });
      expect(ran).toMatchObject({ ok: true, ran: true, status: 'ok', workItemId: expect.any(String) });
      const item = await started.runtime.work.queue.get(ran.workItemId);
      expect(item).toMatchObject({ description: 'Check the inbox.', source: `cron:${job.id}` });
      expect(await call('cron.remove', { id: job.id })).toEqual({ ok: true, removed: true, id: job.id });
      expect((await call('cron.list', {})).jobs).toEqual([]);
    },
    commandTimeoutMs * 5,
  );
});
