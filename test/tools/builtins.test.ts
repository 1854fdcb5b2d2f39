import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createBashTool,
  createBuiltinTools,
  createHttpFetchTool,
  createMemoryTools,
  type MemoryToolBackend,
} from '../../src/tools/index.js';
import { createToolContext, useTempDirs } from './helpers.js';

const tempDir = useTempDirs();

describe('built-in tool set', () => {
  it('leaves bash and http_fetch off unless enabled', () => {
    expect(createBuiltinTools().map((tool) => tool.name)).toEqual([
      'read_file',
      'write_file',
      'edit_file',
      'list_files',
      'grep',
    ]);
    const all = createBuiltinTools({
      bash: { enabled: true },
      httpFetch: { enabled: true, allowedHosts: ['example.com'] },
      files: false,
    });
    expect(all.map((tool) => tool.name)).toEqual(['bash', 'http_fetch']);
  });
});

describe('bash', () => {
  it('runs in the workspace with a clean environment and reports exit code and output', async () => {
    const workspace = await tempDir();
    process.env.AGENTD_TEST_SECRET = 'leak';
    const tool = createBashTool();
    const result = await tool.execute(
      tool.input.parse({ command: 'pwd; echo "secret=$AGENTD_TEST_SECRET"; echo oops >&2; exit 2' }),
      createToolContext(workspace),
    );
    delete process.env.AGENTD_TEST_SECRET;
    expect(result).toMatchObject({ isError: true });
    const content = typeof result === 'string' ? result : result.content;
    expect(content).toMatch(/^exit_code: 2\n/);
    expect(content).toContain(`stdout:\n${workspace}\nsecret=\n`);
    expect(content).toContain('stderr:\noops');
  });

  it('kills the command at its timeout and caps output', async () => {
    const tool = createBashTool({ timeoutMs: 300, maxOutputBytes: 100 });
    const workspace = await tempDir();
    const slow = await tool.execute(
      tool.input.parse({ command: 'sleep 20 & wait' }),
      createToolContext(workspace),
    );
    expect(slow).toMatchObject({ isError: true, content: expect.stringMatching(/^timed out after 300 ms/) });
    const noisy = await tool.execute(
      tool.input.parse({ command: 'head -c 5000 /dev/zero | tr "\\0" a' }),
      createToolContext(workspace),
    );
    const content = typeof noisy === 'string' ? noisy : noisy.content;
    expect(content).toContain(`${'a'.repeat(100)}\n[… 4900 more bytes cut]`);
  });

  it('stops when the run is aborted', async () => {
    const controller = new AbortController();
    const tool = createBashTool();
    const pending = tool.execute(
      tool.input.parse({ command: 'sleep 20' }),
      createToolContext(await tempDir(), { signal: controller.signal }),
    );
    setImmediate(() => controller.abort());
    expect(await pending).toMatchObject({ isError: true, content: expect.stringMatching(/^aborted/) });
  });
});

describe('http_fetch', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

  async function start() {
    server = createServer((request, response) => {
      if (request.url === '/redirect-out') {
        response.writeHead(302, { location: 'http://forbidden.test/x' });
        response.end();
        return;
      }
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.end(`you asked for ${request.url}`);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it('fetches allowlisted hosts and refuses others, redirects included', async () => {
    const base = await start();
    const tool = createHttpFetchTool({ allowedHosts: ['127.0.0.1'] });
    const context = createToolContext('/tmp');
    expect(await tool.execute(tool.input.parse({ url: `${base}/hello` }), context)).toEqual({
      content: 'status: 200\ncontent-type: text/plain\n\nyou asked for /hello',
      isError: false,
    });
    await expect(tool.execute(tool.input.parse({ url: 'http://example.com/' }), context)).rejects.toThrow(
      /not in the http_fetch allowlist/,
    );
    await expect(tool.execute(tool.input.parse({ url: `${base}/redirect-out` }), context)).rejects.toThrow(
      /forbidden\.test is not in/,
    );
    await expect(tool.execute(tool.input.parse({ url: 'file:///etc/passwd' }), context)).rejects.toThrow(
      /Only http and https/,
    );
    expect(tool.policyResource?.({ url: `${base}/x` }, context)).toBe('127.0.0.1');
  });
});

describe('memory tools', () => {
  it('search is scoped to the calling agent and get returns full text', async () => {
    const calls: unknown[] = [];
    const memory: MemoryToolBackend = {
      search: async (query) => {
        calls.push(query);
        return [{ id: 'main#4', content: 'The user prefers tea.', score: 0.9, createdAt: 0 }];
      },
      get: async (id) =>
        id === 'main#4'
          ? { id, content: 'The user prefers tea over coffee.', role: 'user', createdAt: 0 }
          : undefined,
    };
    const [search, get] = createMemoryTools(memory);
    const context = createToolContext('/tmp', { agentId: 'helper' });
    expect(await search!.execute(search!.input.parse({ query: 'drinks' }), context)).toBe(
      '[main#4] (score 0.900, 1970-01-01T00:00:00.000Z) The user prefers tea.',
    );
    expect(calls).toEqual([{ agentId: 'helper', query: 'drinks', limit: 5 }]);
    expect(await get!.execute({ id: 'main#4' }, context)).toContain('tea over coffee');
    expect(await get!.execute({ id: 'nope' }, context)).toMatchObject({ isError: true });
  });
});
