import { afterEach, describe, expect, it } from 'vitest';
import { type BusEvent, type BusEventMap, createBus } from '../../src/bus/index.js';
import { createMcpClientManager, type McpClientManager, mcpConfigSchema } from '../../src/mcp/index.js';
import { createToolRegistry, executeToolCall } from '../../src/tools/index.js';
import { silentLogger } from '../../src/util/index.js';
import { createToolContext } from '../tools/helpers.js';
import { calcServerPath } from './helpers.js';

const managers: McpClientManager[] = [];
afterEach(async () => {
  await Promise.all(managers.splice(0).map((manager) => manager.close()));
});

function setup(servers: Record<string, unknown>, env: NodeJS.ProcessEnv = process.env) {
  const bus = createBus();
  const registry = createToolRegistry();
  const manager = createMcpClientManager({
    config: mcpConfigSchema.parse({ servers, retry: { initial_delay_ms: 20, max_delay_ms: 100 } }),
    registry,
    bus,
    logger: silentLogger,
    env,
  });
  managers.push(manager);
  const next = <K extends keyof BusEventMap>(type: K): Promise<BusEvent<K>> =>
    new Promise((resolve) => {
      const off = bus.on(type, (event) => {
        off();
        resolve(event);
      });
    });
  const call = (name: string, args: Record<string, unknown> = {}) =>
    executeToolCall(
      { id: 'call_1', name, arguments: args },
      { registry, context: createToolContext(process.cwd(), { bus }) },
    );
  return { bus, registry, manager, next, call };
}

const calc = { command: process.execPath, args: [calcServerPath] };

describe('MCP client manager', () => {
  it("resolves a close called while another runs only once the servers' processes are gone", async () => {
    const { manager, call } = setup({ calc });
    await manager.start();
    const pid = Number((await call('mcp__calc__pid')).content);
    expect(pid).toBeGreaterThan(0);
    const first = manager.close();
    await manager.close();
    expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
    await first;
  });

  it('gives a stdio server only the configured variables plus the safe defaults', async () => {
    const { manager, call } = setup(
      { calc: { ...calc, env: { CALC_KEY: 'k-1' } } },
      { PATH: process.env.PATH, HOME: '/home/test', OPENAI_API_KEY: 'sk-parent-secret' },
    );
    await manager.start();
    const outcome = await call('mcp__calc__env');
    const seen = JSON.parse(outcome.content) as { names: string[]; key: string };
    expect(seen.key).toBe('k-1');
    expect(seen.names).toContain('PATH');
    expect(seen.names).not.toContain('OPENAI_API_KEY');
    const allowed = ['CALC_KEY', 'HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER'];
    expect(seen.names.filter((name) => !allowed.includes(name))).toEqual([]);
  });

  it('reports a server that dies, drops its tools and reconnects with backoff', async () => {
    const { manager, registry, next, call } = setup({ calc });
    await manager.start();
    expect(registry.has('mcp__calc__add')).toBe(true);

    const failed = next('mcp:server-failed');
    const crash = await call('mcp__calc__crash');
    expect(crash.isError).toBe(true);
    const failure = await failed;
    expect(failure.data).toMatchObject({ server: 'calc', attempt: 1, retryInMs: 20 });
    expect(failure.data.error).toContain('calc: crashing on purpose');
    const ready = next('mcp:server-ready');
    expect(manager.list()[0]).toMatchObject({ state: 'failed', tools: [] });
    expect(registry.has('mcp__calc__add')).toBe(false);
    expect((await call('mcp__calc__add', { a: 1, b: 2 })).status).toBe('unknown_tool');

    expect((await ready).data).toMatchObject({ server: 'calc', transport: 'stdio' });
    expect(manager.list()[0]).toMatchObject({ state: 'ready', attempt: 0 });
    expect((await call('mcp__calc__add', { a: 1, b: 2 })).content).toBe('3');
  });

  it('keeps retrying a server that cannot start, without throwing', async () => {
    const { manager, bus } = setup({ broken: { command: '/nonexistent/mcp-server' } });
    const failures: Array<BusEventMap['mcp:server-failed']> = [];
    const secondFailure = new Promise<void>((resolve) => {
      bus.on('mcp:server-failed', (event) => {
        failures.push(event.data);
        if (failures.length === 2) resolve();
      });
    });
    await manager.start();
    expect(manager.list()[0]).toMatchObject({ name: 'broken', state: 'failed', attempt: 1 });
    await secondFailure;
    expect(failures.map((failure) => [failure.attempt, failure.retryInMs])).toEqual([
      [1, 20],
      [2, 40],
    ]);
    expect(failures[0]!.error).toMatch(/ENOENT/);
  });

  it('refreshes the registered tools when the server says its list changed', async () => {
    const { manager, registry, next, call } = setup({ calc });
    await manager.start();
    expect(registry.has('mcp__calc__multiply')).toBe(false);
    const changed = next('mcp:tools-changed');
    expect((await call('mcp__calc__grow')).content).toBe('grown');
    expect((await changed).data.tools).toContain('mcp__calc__multiply');
    expect((await call('mcp__calc__multiply', { a: 6, b: 7 })).content).toBe('42');
  });
});
