import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import type { CliIo } from '../../src/cli/output.js';
import { startFakeOpenAIServer } from '../helpers/fake-openai-server.js';
import { startRuntime, tempHome } from '../runtime/helpers.js';

const saved = { ...process.env };
const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
  for (const key of ['AGENTD_PORT', 'AGENTD_MODEL', 'OPENAI_BASE_URL', 'OPENAI_API_KEY'])
    if (saved[key] === undefined) delete process.env[key];
    else process.env[key] = saved[key];
});

async function doctor(env: Record<string, string>) {
  Object.assign(process.env, env);
  let out = '';
  const io: CliIo = {
    stdout: (text) => {
      out += text;
    },
    stderr: () => {},
  };
  const code = await main(['node', 'agentd', '--home', tempHome('agentd-doctor-'), 'doctor', '--json'], io);
  const report = JSON.parse(out) as {
    ok: boolean;
    checks: Array<{ check: string; ok: boolean; detail: string }>;
  };
  return { code, report, check: (name: string) => report.checks.find((check) => check.check === name)! };
}

const portOf = (url: string) => Number(new URL(url).port);

describe('agentd doctor', () => {
  it('reports an agentd already running on its port instead of failing', async () => {
    const started = await startRuntime();
    cleanups.push(() => started.runtime.close());
    const { code, check } = await doctor({
      AGENTD_PORT: String(portOf(started.url)),
      AGENTD_MODEL: 'local/agentd-local',
    });
    expect(check('port')).toEqual({
      check: 'port',
      ok: true,
      detail: `agentd ${started.runtime.version} is already running on 127.0.0.1:${portOf(started.url)}`,
    });
    expect(code).toBe(0);
  });

  it('fails when another program holds the port', async () => {
    const sockets = new Set<Socket>();
    const server: Server = createServer((socket) => {
      sockets.add(socket);
      socket.end('HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(
      () =>
        new Promise((resolve) => {
          for (const socket of sockets) socket.destroy();
          server.close(() => resolve());
        }),
    );
    const port = (server.address() as { port: number }).port;
    const { code, check } = await doctor({ AGENTD_PORT: String(port), AGENTD_MODEL: 'local/agentd-local' });
    expect(check('port')).toMatchObject({
      ok: false,
      detail: expect.stringContaining('in use by another program'),
    });
    expect(code).toBe(1);
  });

  it('probes the model endpoint: a dead OPENAI_BASE_URL fails, a live one passes', async () => {
    const dead = await doctor({
      AGENTD_PORT: '0',
      AGENTD_MODEL: 'openai/some-model',
      OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
    });
    expect(dead.check('model')).toMatchObject({
      ok: false,
      detail: expect.stringContaining('cannot reach http://127.0.0.1:9'),
    });
    expect(dead.code).toBe(1);

    const fake = await startFakeOpenAIServer();
    cleanups.push(() => fake.close());
    const live = await doctor({
      AGENTD_PORT: '0',
      AGENTD_MODEL: 'openai/some-model',
      OPENAI_BASE_URL: fake.baseURL,
    });
    expect(live.check('model')).toMatchObject({ ok: true, detail: expect.stringContaining('answers (HTTP') });
    expect(fake.requests.map((request) => `${request.method} ${request.path}`)).toEqual(['GET /v1/models']);
  });
});
