import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentdMcpHttpServer } from '../../src/runtime/mcp-server.js';
import type { Runtime } from '../../src/runtime.js';
import { startRuntime } from '../runtime/helpers.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const textOf = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

async function mcpClientOf(runtime: Runtime): Promise<Client> {
  const server = await startAgentdMcpHttpServer(runtime, {
    host: '127.0.0.1',
    port: 0,
    token: runtime.state.token,
  });
  cleanups.push(() => server.close());
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(server.url), {
      requestInit: { headers: { Authorization: `Bearer ${runtime.state.token}` } },
    }),
  );
  cleanups.push(() => client.close());
  return client;
}

describe("agentd's MCP goal tool", () => {
  it('answers a goal called again with its idempotency key by the plan already made', async () => {
    const { runtime } = await startRuntime();
    cleanups.push(() => runtime.close());
    const client = await mcpClientOf(runtime);
    const goal = { text: 'Collect the open questions. Then list the risks.', idempotencyKey: 'mcp-1' };

    const first = await client.callTool({ name: 'goal', arguments: goal });
    expect(first.isError).toBeFalsy();
    const again = await client.callTool({ name: 'goal', arguments: goal });
    expect(textOf(again)).toBe(textOf(first));
    const items = await runtime.work.queue.list({ sessionKey: 'agent:main:main' });
    expect(items.length).toBeGreaterThan(0);
    expect(items.every((item) => item.params.idempotencyKey === 'mcp-1')).toBe(true);
    expect(new Set(items.map((item) => item.params.planId)).size).toBe(1);

    const other = await client.callTool({
      name: 'goal',
      arguments: { text: 'Something else entirely.', idempotencyKey: 'mcp-1' },
    });
    expect(other.isError).toBe(true);
    expect(textOf(other)).toContain('CONFLICT');
    const badKey = await client.callTool({ name: 'goal', arguments: { ...goal, idempotencyKey: 'a\nb' } });
    expect(badKey.isError).toBe(true);
  });
});
