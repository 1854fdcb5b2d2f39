import { chmodSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { loadConfig } from '../../src/config/index.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { startFakeOpenAIServer } from '../helpers/fake-openai-server.js';
import { captureLog, tempHome } from '../runtime/helpers.js';
import { calcServerPath, startHttpMcpServer } from './helpers.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function docsServer(): McpServer {
  const server = new McpServer({ name: 'docs', version: '1.0.0' });
  server.registerTool(
    'lookup',
    { description: 'Looks a topic up in the docs', inputSchema: { topic: z.string() } },
    async ({ topic }) => ({ content: [{ type: 'text', text: `docs about ${topic}: connect tools` }] }),
  );
  server.registerTool('secret', { description: 'Reads the secret page' }, async () => ({
    content: [{ type: 'text', text: 'the secret page' }],
  }));
  return server;
}

describe('MCP servers configured in agentd.yaml', () => {
  it('an agent calls a stdio and a Streamable HTTP server tool, and policy denies another', async () => {
    const model = await startFakeOpenAIServer();
    cleanups.push(() => model.close());
    const docs = await startHttpMcpServer(docsServer);
    cleanups.push(() => docs.close());
    const home = tempHome('agentd-mcp-');
    writeFileSync(
      join(home, 'agentd.yaml'),
      JSON.stringify({
        mcp: {
          servers: {
            calc: { command: process.execPath, args: [calcServerPath], env: { CALC_KEY: 'calc-value' } },
            docs: { url: docs.url, headers: { Authorization: 'Bearer docs-token-123' } },
          },
        },
        policy: {
          policies: [
            {
              name: 'no-secrets',
              rules: [{ target_id: 'mcp__docs__secret', action: 'deny', reason: 'secret pages are off' }],
            },
          ],
        },
      }),
    );
    // An operator's hook that records every call it is asked about: MCP tools pass through hooks too.
    const hookSaw = join(home, 'hook-saw');
    mkdirSync(hookSaw);
    mkdirSync(join(home, 'hooks'));
    writeFileSync(
      join(home, 'hooks', 'before_tool_call.record'),
      // One file per call: the calls of a batch run side by side (each hook in its own PID namespace).
      `#!/bin/sh\ncat > "$(mktemp ${hookSaw}/call.XXXXXX)"\necho '{"action":"allow"}'\n`,
    );
    chmodSync(join(home, 'hooks', 'before_tool_call.record'), 0o755);
    const env = { AGENTD_HOME: home, OPENAI_BASE_URL: model.baseURL, AGENTD_MODEL: 'openai/gpt-test' };
    const runtime: Runtime = await createRuntime({
      config: loadConfig({ cwd: home, env }),
      env,
      logDestination: captureLog().stream,
    });
    cleanups.push(() => runtime.close());
    expect(runtime.mcp.list().map((server) => [server.name, server.state])).toEqual([
      ['calc', 'ready'],
      ['docs', 'ready'],
    ]);

    model.respond(
      {
        type: 'stream',
        toolCalls: [
          { id: 'call_add', name: 'mcp__calc__add', argumentChunks: ['{"a":2,', '"b":3}'] },
          { id: 'call_lookup', name: 'mcp__docs__lookup', argumentChunks: ['{"topic":"mcp"}'] },
          { id: 'call_secret', name: 'mcp__docs__secret', argumentChunks: ['{}'] },
          { id: 'call_bad', name: 'mcp__calc__add', argumentChunks: ['{"a":"two","b":3}'] },
        ],
      },
      { type: 'stream', text: ['2 + 3 is 5.'] },
    );
    const denied: string[] = [];
    runtime.bus.on('tool:policy-denied', (event) => denied.push(event.data.toolName));
    const finished: Array<[string, boolean]> = [];
    runtime.bus.on('run:tool-finished', (event) => finished.push([event.data.toolName, event.data.isError]));
    const result = await runtime.sendMessage({ text: 'add 2 and 3, then read the docs' });
    expect(result).toMatchObject({ status: 'completed', text: '2 + 3 is 5.' });

    const offered = model.requests[0]!.body.tools as Array<{
      function: { name: string; parameters: { properties: Record<string, unknown> } };
    }>;
    const add = offered.find((tool) => tool.function.name === 'mcp__calc__add');
    expect(add?.function.parameters.properties).toEqual({ a: { type: 'number' }, b: { type: 'number' } });
    expect(offered.map((tool) => tool.function.name)).toEqual(
      expect.arrayContaining(['mcp__docs__lookup', 'mcp__docs__secret', 'read_file']),
    );

    const toolMessages = (
      model.requests[1]!.body.messages as Array<{ role: string; tool_call_id?: string; content: string }>
    ).filter((message) => message.role === 'tool');
    const byId = Object.fromEntries(toolMessages.map((message) => [message.tool_call_id, message.content]));
    expect(byId.call_add).toBe('5');
    expect(byId.call_lookup).toBe('docs about mcp: connect tools');
    expect(byId.call_secret).toContain('Policy denied mcp__docs__secret: secret pages are off');
    // The server's JSON Schema is enforced before the call leaves agentd.
    expect(byId.call_bad).toMatch(/Invalid arguments for mcp__calc__add: .*a must be number/);
    expect(denied).toEqual(['mcp__docs__secret']);
    // The same run events as built-in tools (what the ledger, the gateway and the dashboard see)…
    expect(finished).toEqual(
      expect.arrayContaining([
        ['mcp__calc__add', false],
        ['mcp__docs__lookup', false],
      ]),
    );
    // …and the same hooks, with the call's arguments.
    const hooked = readdirSync(hookSaw).map(
      (file) => JSON.parse(readFileSync(join(hookSaw, file), 'utf8')) as { toolName: string },
    );
    expect(hooked).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ toolName: 'mcp__calc__add', arguments: { a: 2, b: 3 } }),
        expect.objectContaining({ toolName: 'mcp__docs__lookup', arguments: { topic: 'mcp' } }),
      ]),
    );
    expect(docs.headers.some((headers) => headers.authorization === 'Bearer docs-token-123')).toBe(true);
    expect(runtime.health().mcp).toEqual({
      calc: { state: 'ready', tools: 5 },
      docs: { state: 'ready', tools: 2 },
    });
  });
});
