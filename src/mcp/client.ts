import './events.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Bus } from '../bus/index.js';
import type { ToolDefinition, ToolRegistry, ToolResult } from '../tools/index.js';
import { ErrorCodes, type Logger, once, SystemError } from '../util/index.js';
import type { McpConfig, McpServerConfig } from './config.js';

export type McpServerState = 'connecting' | 'ready' | 'failed' | 'disabled' | 'closed';

export interface McpServerStatus {
  name: string;
  transport: 'stdio' | 'http';
  state: McpServerState;
  /** Registered names (`mcp__<server>__<tool>`) with the server's own tool names. */
  tools: Array<{ name: string; serverTool: string; description: string }>;
  /** Connection attempts so far (reset by a successful connect). */
  attempt: number;
  lastError?: string;
  /** Tools the server offered that could not be registered (name too long, clash). */
  skippedTools?: string[];
}

export interface McpClientManager {
  /** Connects every enabled server; resolves when each has connected or failed once (never rejects). */
  start(): Promise<void>;
  list(): McpServerStatus[];
  /** Disconnects every server (stdio servers are stopped) and unregisters their tools. */
  close(): Promise<void>;
}

export interface CreateMcpClientManagerOptions {
  config: McpConfig;
  registry: ToolRegistry;
  bus: Bus;
  logger: Logger;
  /** Base for the variables a stdio server inherits (only PATH, HOME, … are taken from it). */
  env?: NodeJS.ProcessEnv;
  /** Relative stdio `cwd` and commands resolve from here (the directory of agentd.yaml). */
  cwd?: string;
  clientVersion?: string;
}

const toolNamePattern = /^[A-Za-z0-9_-]{1,64}$/;
const stderrTailChars = 2_000;

/** `mcp__<server>__<tool>`, with characters the model APIs refuse replaced by `_`. */
export function mcpToolName(server: string, tool: string): string {
  return `mcp__${server}__${tool.replace(/[^A-Za-z0-9_-]/g, '_')}`;
}

/**
 * The SDK's client side, loaded when the first server connects: a runtime with no MCP server configured
 * never loads it, nor what it pulls in (zod-to-json-schema, ajv).
 */
async function loadMcpSdk() {
  const [client, stdio, http, types, ajv] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
    import('@modelcontextprotocol/sdk/validation/ajv'),
  ]);
  return {
    Client: client.Client,
    getDefaultEnvironment: stdio.getDefaultEnvironment,
    StdioClientTransport: stdio.StdioClientTransport,
    StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
    McpError: types.McpError,
    ToolListChangedNotificationSchema: types.ToolListChangedNotificationSchema,
    validator: new ajv.AjvJsonSchemaValidator(),
  };
}

type McpSdk = Awaited<ReturnType<typeof loadMcpSdk>>;

/** The variables a stdio server gets: the SDK's safe defaults (PATH, HOME, …) plus what is configured. */
function stdioServerEnv(
  sdk: McpSdk,
  configured: Record<string, string>,
  base: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const env: Record<string, string> = {};
  const defaults = sdk.getDefaultEnvironment();
  for (const key of Object.keys(defaults)) {
    const value = base[key];
    if (value !== undefined && !value.startsWith('()')) env[key] = value;
  }
  return { ...env, ...configured };
}

function renderResult(result: CallToolResult): ToolResult {
  const parts: string[] = [];
  for (const block of result.content ?? []) {
    switch (block.type) {
      case 'text':
        parts.push(block.text);
        break;
      case 'resource':
        parts.push('text' in block.resource ? block.resource.text : `[resource ${block.resource.uri}]`);
        break;
      case 'resource_link':
        parts.push(`[resource ${block.uri}${block.name ? ` (${block.name})` : ''}]`);
        break;
      default:
        // Images and audio cannot be passed on as tool text; the model is told what it did not get.
        parts.push(`[${block.type} content, ${'mimeType' in block ? block.mimeType : 'unknown type'}]`);
    }
  }
  if (parts.length === 0 && result.structuredContent !== undefined)
    parts.push(JSON.stringify(result.structuredContent));
  return { content: parts.join('\n'), isError: result.isError === true };
}

interface ServerSlot {
  name: string;
  config: McpServerConfig;
  transport: 'stdio' | 'http';
  state: McpServerState;
  client?: Client;
  attempt: number;
  lastError?: string;
  tools: McpServerStatus['tools'];
  skippedTools: string[];
  retryTimer?: NodeJS.Timeout;
  stderrTail: string;
}

/**
 * Keeps one SDK client per configured MCP server and mirrors each server's tools into the tool registry,
 * so they run through the same validation, hooks, policy and ledger events as built-in tools. A server
 * that fails is unregistered, reported on the bus and retried with exponential backoff; it never throws
 * into the runtime.
 */
export function createMcpClientManager(options: CreateMcpClientManagerOptions): McpClientManager {
  const { config, registry, bus, logger } = options;
  let sdkLoaded: Promise<McpSdk> | undefined;
  const slots = new Map<string, ServerSlot>();
  // A second caller of `close` waits for the same close: the servers' processes are gone once any caller's
  // resolves.
  const closing = once(async () => {
    await Promise.all(
      [...slots.values()].map(async (slot) => {
        if (slot.retryTimer) clearTimeout(slot.retryTimer);
        unregisterTools(slot);
        const client = slot.client;
        slot.client = undefined;
        if (slot.state !== 'disabled') slot.state = 'closed';
        await client?.close().catch(() => {});
      }),
    );
  });

  for (const [name, server] of Object.entries(config.servers)) {
    slots.set(name, {
      name,
      config: server,
      transport: 'url' in server ? 'http' : 'stdio',
      state: server.enabled ? 'connecting' : 'disabled',
      attempt: 0,
      tools: [],
      skippedTools: [],
      stderrTail: '',
    });
  }

  const unregisterTools = (slot: ServerSlot) => {
    for (const tool of slot.tools) registry.unregister(tool.name);
    slot.tools = [];
  };

  const toolDefinition = (
    sdk: McpSdk,
    slot: ServerSlot,
    client: Client,
    tool: Tool,
    name: string,
  ): ToolDefinition => {
    const { $schema: _ignored, ...inputJsonSchema } = tool.inputSchema as Record<string, unknown>;
    const check = sdk.validator.getValidator<Record<string, unknown>>(tool.inputSchema as never);
    const input = z.record(z.string(), z.unknown()).superRefine((value, context) => {
      const verdict = check(value);
      if (!verdict.valid) context.addIssue({ code: 'custom', message: verdict.errorMessage });
    });
    return {
      name,
      description: tool.description ?? tool.title ?? `${tool.name} (MCP server ${slot.name})`,
      input,
      inputJsonSchema,
      async execute(args, context) {
        if (slot.client !== client || slot.state !== 'ready') {
          throw new SystemError({
            code: ErrorCodes.mcpUnavailable,
            message: `MCP server "${slot.name}" is not connected (${slot.lastError ?? slot.state})`,
          });
        }
        try {
          const result = (await client.callTool({ name: tool.name, arguments: args }, undefined, {
            signal: context.signal,
            timeout: config.call_timeout_ms,
          })) as CallToolResult;
          return renderResult(result);
        } catch (error) {
          // Protocol errors (a timeout, an unknown tool) leave the connection usable; anything else means
          // the transport broke, which for HTTP servers is the only sign that the server went away.
          if (!(error instanceof sdk.McpError) && !context.signal.aborted) failed(slot, client, error);
          throw error;
        }
      },
    };
  };

  const registerTools = async (sdk: McpSdk, slot: ServerSlot, client: Client): Promise<void> => {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor ? { cursor } : undefined, {
        timeout: config.connect_timeout_ms,
      });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    unregisterTools(slot);
    slot.skippedTools = [];
    for (const tool of tools) {
      const name = mcpToolName(slot.name, tool.name);
      if (!toolNamePattern.test(name) || registry.has(name)) {
        slot.skippedTools.push(tool.name);
        logger.warn(
          { server: slot.name, tool: tool.name },
          `MCP tool "${tool.name}" is not registered: "${name}" is too long or already taken`,
        );
        continue;
      }
      registry.register(toolDefinition(sdk, slot, client, tool, name));
      slot.tools.push({ name, serverTool: tool.name, description: tool.description ?? '' });
    }
  };

  const createTransport = (sdk: McpSdk, slot: ServerSlot): Transport => {
    const server = slot.config;
    if ('url' in server) {
      return new sdk.StreamableHTTPClientTransport(new URL(server.url), {
        requestInit: { headers: server.headers },
      });
    }
    const transport = new sdk.StdioClientTransport({
      command: server.command,
      args: server.args,
      env: stdioServerEnv(sdk, server.env, options.env),
      stderr: 'pipe',
      ...(server.cwd || options.cwd ? { cwd: server.cwd ?? options.cwd } : {}),
    });
    slot.stderrTail = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      slot.stderrTail = (slot.stderrTail + chunk.toString('utf8')).slice(-stderrTailChars);
    });
    return transport;
  };

  const scheduleRetry = (slot: ServerSlot, error: unknown) => {
    const message = error instanceof Error ? error.message : String(error);
    const stderr = slot.stderrTail.trim();
    slot.lastError = stderr ? `${message} (stderr: ${stderr.split('\n').slice(-3).join(' | ')})` : message;
    slot.state = 'failed';
    const delay = Math.min(
      config.retry.max_delay_ms,
      config.retry.initial_delay_ms * 2 ** Math.max(0, slot.attempt - 1),
    );
    logger.warn(
      { server: slot.name, attempt: slot.attempt, retryInMs: delay, err: slot.lastError },
      `MCP server "${slot.name}" is unavailable; retrying`,
    );
    bus.publish('mcp:server-failed', {
      server: slot.name,
      error: slot.lastError,
      attempt: slot.attempt,
      retryInMs: delay,
    });
    slot.retryTimer = setTimeout(() => {
      slot.retryTimer = undefined;
      void connect(slot);
    }, delay);
    slot.retryTimer.unref();
  };

  /** A connected client broke: drop its tools and go back to retrying (once per client). */
  const failed = (slot: ServerSlot, client: Client, error: unknown) => {
    if (closing.started || slot.client !== client) return;
    slot.client = undefined;
    unregisterTools(slot);
    void client.close().catch(() => {});
    slot.attempt = 1;
    scheduleRetry(slot, error);
  };

  const connect = async (slot: ServerSlot): Promise<void> => {
    if (closing.started) return;
    slot.state = 'connecting';
    slot.attempt += 1;
    sdkLoaded ??= loadMcpSdk();
    const sdk = await sdkLoaded;
    const client = new sdk.Client(
      { name: 'agentd', version: options.clientVersion ?? '0.0.0' },
      { capabilities: {} },
    );
    try {
      await client.connect(createTransport(sdk, slot), { timeout: config.connect_timeout_ms });
      await registerTools(sdk, slot, client);
    } catch (error) {
      await client.close().catch(() => {});
      unregisterTools(slot);
      if (!closing.started) scheduleRetry(slot, error);
      return;
    }
    if (closing.started) {
      unregisterTools(slot);
      await client.close().catch(() => {});
      return;
    }
    slot.client = client;
    slot.state = 'ready';
    const attempt = slot.attempt;
    slot.attempt = 0;
    slot.lastError = undefined;
    client.onclose = () => failed(slot, client, new Error(`MCP server "${slot.name}" closed the connection`));
    client.setNotificationHandler(sdk.ToolListChangedNotificationSchema, async () => {
      if (slot.client !== client) return;
      try {
        await registerTools(sdk, slot, client);
        bus.publish('mcp:tools-changed', {
          server: slot.name,
          tools: slot.tools.map((tool) => tool.name),
        });
      } catch (error) {
        failed(slot, client, error);
      }
    });
    logger.info(
      { server: slot.name, tools: slot.tools.length },
      `MCP server "${slot.name}" connected with ${slot.tools.length} tool(s)`,
    );
    bus.publish('mcp:server-ready', {
      server: slot.name,
      transport: slot.transport,
      tools: slot.tools.map((tool) => tool.name),
      attempt,
    });
  };

  return {
    async start() {
      await Promise.all(
        [...slots.values()].filter((slot) => slot.state === 'connecting').map((slot) => connect(slot)),
      );
    },
    list: () =>
      [...slots.values()].map((slot) => ({
        name: slot.name,
        transport: slot.transport,
        state: slot.state,
        tools: slot.tools.map((tool) => ({ ...tool })),
        attempt: slot.attempt,
        ...(slot.lastError ? { lastError: slot.lastError } : {}),
        ...(slot.skippedTools.length ? { skippedTools: [...slot.skippedTools] } : {}),
      })),
    close: closing.run,
  };
}
