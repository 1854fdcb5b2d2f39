import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { type FakeOpenAIServer, startFakeOpenAIServer } from '../helpers/fake-openai-server.js';
import { tempHome } from '../runtime/helpers.js';

const bin = fileURLToPath(new URL('../../bin/agentd.js', import.meta.url));
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function fakeModel(): Promise<FakeOpenAIServer> {
  const model = await startFakeOpenAIServer();
  cleanups.push(() => model.close());
  return model;
}

const textOf = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;
const modelEnv = (model: FakeOpenAIServer) => ({
  ...(process.env as Record<string, string>),
  OPENAI_BASE_URL: model.baseURL,
  AGENTD_MODEL: 'openai/gpt-test',
});

/** `agentd mcp serve --http` in a child process on a free port: its URL once it printed it. */
async function serveHttp(home: string, model: FakeOpenAIServer, extraArgs: string[] = []): Promise<string> {
  const child: ChildProcess = spawn(
    process.execPath,
    [bin, '--home', home, 'mcp', 'serve', '--http', '--port', '0', ...extraArgs],
    { env: modelEnv(model), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  cleanups.push(async () => {
    child.kill('SIGTERM');
    await exited;
  });
  const [line] = await createInterface({ input: child.stdout! })
    [Symbol.asyncIterator]()
    .next()
    .then((next) => [next.value as string]);
  return (JSON.parse(line!) as { url: string }).url;
}

describe('agentd mcp serve', () => {
  it('serves chat, work and memory to an SDK client over stdio', async () => {
    const model = await fakeModel();
    model.respond({ type: 'stream', text: ['Hello over ', 'MCP.'] });
    const client = new Client({ name: 'test', version: '1.0.0' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [bin, '--home', tempHome('agentd-mcp-serve-'), 'mcp', 'serve'],
        env: modelEnv(model),
        stderr: 'pipe',
      }),
    );
    cleanups.push(() => client.close());
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual([
      'chat',
      'goal',
      'memory_search',
      'work_get',
      'work_list',
      'work_submit',
      'workflow_run',
    ]);

    const reply = await client.callTool({ name: 'chat', arguments: { text: 'hi there' } });
    expect(reply.isError).toBeFalsy();
    expect(textOf(reply)).toBe('Hello over MCP.');

    const found = await client.callTool({ name: 'memory_search', arguments: { query: 'hello' } });
    const hits = JSON.parse(textOf(found)) as Array<{ sessionKey: string; content: string }>;
    expect(
      hits.some((hit) => hit.sessionKey === 'agent:main:mcp' && hit.content.includes('Hello over')),
    ).toBe(true);

    const submitted = await client.callTool({
      name: 'work_submit',
      arguments: { title: 'Sort the notes', agentId: 'nobody-runs-this' },
    });
    const { id } = JSON.parse(textOf(submitted)) as { id: string };
    const item = await client.callTool({ name: 'work_get', arguments: { id } });
    expect(JSON.parse(textOf(item))).toMatchObject({ item: { id, title: 'Sort the notes' }, ledger: [] });
    const missing = await client.callTool({ name: 'work_get', arguments: { id: 'work_missing' } });
    expect(missing.isError).toBe(true);
  });

  it('serves Streamable HTTP behind the gateway token', async () => {
    const model = await fakeModel();
    model.respond({ type: 'stream', text: ['Hello over HTTP.'] });
    const home = tempHome('agentd-mcp-serve-http-');
    const url = await serveHttp(home, model);
    const token = readFileSync(join(home, 'token'), 'utf8').trim();

    const refused = await fetch(url, { method: 'POST', body: '{}' });
    expect(refused.status).toBe(401);

    const client = new Client({ name: 'test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    cleanups.push(() => client.close());
    const reply = await client.callTool({
      name: 'chat',
      arguments: { text: 'hi', sessionKey: 'agent:main:http' },
    });
    expect(textOf(reply)).toBe('Hello over HTTP.');
    const listed = await client.callTool({ name: 'work_list', arguments: { state: 'queued' } });
    expect(JSON.parse(textOf(listed))).toEqual([]);
  });

  it('refuses a request naming another Host on loopback: a rebound DNS name cannot reach a --no-auth server', async () => {
    const model = await fakeModel();
    model.respond({ type: 'stream', text: ['Hello, own host.'] });
    const url = await serveHttp(tempHome('agentd-mcp-serve-host-'), model, ['--no-auth']);
    const { port } = new URL(url);
    const initialize = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'page', version: '1' } },
    });
    /** A POST as a page's script sends it after rebinding its own name to 127.0.0.1: its Host is its name. */
    const post = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const request = httpRequest(
          {
            host: '127.0.0.1',
            port,
            path: '/mcp',
            method: 'POST',
            headers: {
              host,
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
            },
          },
          (response) => {
            response.resume();
            resolve(response.statusCode ?? 0);
          },
        );
        request.on('error', reject);
        request.end(initialize);
      });
    expect(await post(`attacker.example:${port}`)).toBe(421);
    expect(await post('127.0.0.1:1')).toBe(421);
    expect(await post(`127.0.0.1:${port}`)).toBe(200);
    expect(await post(`localhost:${port}`)).toBe(200);
  });

  it('runs workflows from the configured workflow directories only', async () => {
    const home = tempHome('agentd-mcp-serve-wf-');
    const example = fileURLToPath(new URL('../../examples/mini-editor', import.meta.url));
    // One copy in the default workflow library, one in the workspace, where the agent's tools can write.
    cpSync(example, join(home, 'workflow-library', 'mini-editor'), { recursive: true });
    cpSync(example, join(home, 'workspace', 'mini-editor'), { recursive: true });
    const client = new Client({ name: 'test', version: '1.0.0' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [bin, '--home', home, 'mcp', 'serve'],
        // The offline model: the example workflow runs without a key.
        env: { ...(process.env as Record<string, string>), AGENTD_MODEL: '' },
        stderr: 'pipe',
      }),
    );
    cleanups.push(() => client.close());
    const input = { request: 'Create a note about tide pools' };

    for (const dir of [join(home, 'workspace', 'mini-editor'), '../workspace/mini-editor', example]) {
      const refused = await client.callTool({ name: 'workflow_run', arguments: { dir, input } });
      expect(refused.isError, dir).toBe(true);
      expect(textOf(refused), dir).toMatch(/FORBIDDEN.*not in a configured workflow directory/);
    }
    const ran = await client.callTool(
      { name: 'workflow_run', arguments: { dir: 'mini-editor', input } },
      undefined,
      { timeout: 60_000 },
    );
    expect(ran.isError).toBeFalsy();
    expect(JSON.parse(textOf(ran))).toMatchObject({
      result: { status: 'success', output: { title: expect.any(String) } },
    });
  }, 90_000);
});
