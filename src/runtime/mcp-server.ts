import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { isLoopbackHost, namesLoopbackServer, parseHostHeader, secretsEqual } from '../gateway/index.js';
import type { Runtime } from '../runtime.js';
import { coerceError } from '../util/index.js';
import { workClassFilter, workStates } from '../work/index.js';

const text = (value: string, isError = false): CallToolResult => ({
  content: [{ type: 'text', text: value }],
  ...(isError ? { isError: true } : {}),
});
const json = (value: unknown): CallToolResult => text(JSON.stringify(value, null, 2));

/** Errors become `isError` results the calling agent can read, never protocol failures. */
function guarded<Args>(run: (args: Args) => Promise<CallToolResult>) {
  return async (args: Args): Promise<CallToolResult> => {
    try {
      return await run(args);
    } catch (error) {
      const failure = coerceError(error);
      return text(`${failure.code}: ${failure.message}`, true);
    }
  };
}

/**
 * agentd's own MCP server: chat with an agent, plan a goal, search memory, submit and inspect work, run a
 * workflow. One server object per connection (stdio) or per request (stateless HTTP); all share `runtime`.
 * Not exported: the exported functions below keep the SDK's types out of agentd's published typings (its
 * declarations need DOM types a Node project does not have). They import the SDK's server half when agentd
 * is first served over MCP: every runtime loads this module, and most never serve MCP.
 */
function createAgentdMcpServer(runtime: Runtime, Server: typeof McpServer): McpServer {
  const server = new Server({ name: 'agentd', version: runtime.version });
  const agentId = z.string().min(1).max(64).default('main').describe('agent id (default main)');

  server.registerTool(
    'chat',
    {
      description:
        'Send a message to an agentd agent and get its reply. The conversation continues in the session.',
      inputSchema: {
        text: z.string().min(1).max(100_000),
        agentId,
        sessionKey: z.string().min(1).max(256).optional().describe('default agent:<agentId>:mcp'),
      },
    },
    guarded(async ({ text: message, agentId: agent, sessionKey }) => {
      const result = await runtime.sendMessage({
        text: message,
        agentId: agent,
        sessionKey: sessionKey ?? `agent:${agent}:mcp`,
      });
      if (result.status === 'completed') return text(result.text);
      return text(
        `The run ended with status ${result.status}${result.error ? `: ${result.error.message}` : ''}.\n${result.text}`,
        true,
      );
    }),
  );

  server.registerTool(
    'goal',
    {
      description:
        "Hand a goal to agentd's planner: it becomes work items that worker agents run in the background.",
      inputSchema: {
        text: z.string().min(1).max(20_000),
        agentId,
        idempotencyKey: z
          .string()
          .min(1)
          .max(256)
          // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
          .refine((key) => !/[\u0000-\u001f\u007f]/.test(key), 'an idempotency key has no control characters')
          .optional()
          .describe('names the goal: called again with the same key, it answers the plan already made'),
      },
    },
    guarded(async ({ text: goal, agentId: agent, idempotencyKey }) =>
      text(
        await runtime.goal({
          text: goal,
          agentId: agent,
          ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
        }),
      ),
    ),
  );

  server.registerTool(
    'memory_search',
    {
      description: "Search an agent's memory (full text, or hybrid when embeddings are configured).",
      inputSchema: {
        query: z.string().min(1).max(2_000),
        agentId,
        sessionKey: z.string().min(1).max(256).optional().describe('only this session'),
        limit: z.number().int().min(1).max(50).default(10),
      },
    },
    guarded(async ({ query, agentId: agent, sessionKey, limit }) => {
      const hits = await runtime.memory.search({
        query,
        agentId: agent,
        limit,
        ...(sessionKey ? { sessionKey } : {}),
      });
      return json(
        hits.map((hit) => ({
          memoryId: hit.address,
          sessionKey: hit.sessionKey,
          role: hit.role,
          content: hit.content,
          score: hit.score,
        })),
      );
    }),
  );

  server.registerTool(
    'work_submit',
    {
      description: "Queue a task for agentd's worker agents. Returns the work item id (see work_get).",
      inputSchema: {
        title: z.string().min(1).max(200),
        description: z.string().max(20_000).default(''),
        agentId: z.string().min(1).max(64).optional().describe('a specific agent; any worker when omitted'),
        priority: z.number().int().min(-1000).max(1000).optional(),
        idempotencyKey: z
          .string()
          .min(1)
          .max(256)
          .optional()
          .describe('names this submission: called again with it, answers the item made the first time'),
      },
    },
    guarded(async ({ title, description, agentId: agent, priority, idempotencyKey }) => {
      const submission = {
        kind: 'task',
        title,
        description,
        source: 'mcp',
        ...(agent ? { agentId: agent } : {}),
        ...(priority !== undefined ? { priority } : {}),
        ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
      };
      const submitted = await (runtime.work.pool ?? runtime.work.queue).submit(submission);
      return json(submitted);
    }),
  );

  server.registerTool(
    'work_get',
    {
      description: 'A work item with its state, outcome and ledger (what the agent recorded while working).',
      inputSchema: { id: z.string().min(1).max(200) },
    },
    guarded(async ({ id }) => {
      const item = await runtime.work.queue.get(id);
      if (!item) return text(`No work item ${id}.`, true);
      // The newest entries: a ledger grows with every run of the item.
      return json({ item, ledger: await runtime.ledger.read(id, { lastN: 1_000 }) });
    }),
  );

  server.registerTool(
    'work_list',
    {
      description:
        'Work items, newest first, optionally by state (queued, running, completed, failed, …); system work such as memory maintenance is left out.',
      inputSchema: {
        state: z.enum(workStates).optional(),
        limit: z.number().int().min(1).max(200).default(50),
      },
    },
    guarded(async ({ state, limit }) =>
      json(
        await runtime.work.queue.list({
          limit,
          order: 'newest',
          ...(state ? { states: [state] } : {}),
          // The runtime's own upkeep (memory maintenance) stays out of it, as in `agentd work list`.
          ...workClassFilter('user', runtime.work.queue.config.systemKinds),
        }),
      ),
    ),
  );

  server.registerTool(
    'workflow_run',
    {
      description:
        "Run an agentd workflow (a directory with workflow.yaml under one of agentd's configured workflow directories, workflows.dirs; a relative path is taken from the first) and wait for its result.",
      inputSchema: { dir: z.string().min(1).max(1_000), input: z.unknown().optional() },
    },
    guarded(async ({ dir, input }) =>
      // A workflow names code to run: a client gets the gateway's confinement, never the program's trust.
      json(await runtime.runWorkflow({ dir, confined: true, ...(input !== undefined ? { input } : {}) })),
    ),
  );

  return server;
}

/**
 * Serves agentd over MCP on this process's stdin and stdout (which then carry only the protocol) until the
 * client closes stdin or `stopped` resolves.
 */
export async function serveAgentdMcpStdio(runtime: Runtime, stopped: Promise<void>): Promise<void> {
  const [{ McpServer }, { StdioServerTransport }] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/mcp.js'),
    import('@modelcontextprotocol/sdk/server/stdio.js'),
  ]);
  const server = createAgentdMcpServer(runtime, McpServer);
  const closed = new Promise<void>((resolve) => {
    server.server.onclose = () => resolve();
  });
  await server.connect(new StdioServerTransport());
  process.stdin.once('end', () => void server.close());
  await Promise.race([closed, stopped]);
  await server.close();
}

export interface AgentdMcpHttpServer {
  /** `http://host:port/mcp` */
  url: string;
  close(): Promise<void>;
}

/**
 * Serves `createAgentdMcpServer` over stateless Streamable HTTP at `/mcp`. Every request must carry
 * `Authorization: Bearer <gateway token>` unless `token` is undefined (development, loopback only).
 */
export async function startAgentdMcpHttpServer(
  runtime: Runtime,
  options: { host: string; port: number; token: string | undefined },
): Promise<AgentdMcpHttpServer> {
  const [{ McpServer }, { StreamableHTTPServerTransport }] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/mcp.js'),
    import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
  ]);
  // Bound to loopback, only requests naming this server are ours: a web page can point any DNS name at
  // 127.0.0.1 (DNS rebinding), and without the token (`--no-auth`) that page would call every tool.
  const checkHost = isLoopbackHost(options.host);
  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const path = (request.url ?? '').split('?')[0];
    if (path !== '/mcp') {
      response.writeHead(404).end();
      return;
    }
    const listeningPort = String((http.address() as AddressInfo | null)?.port ?? options.port);
    if (checkHost && !namesLoopbackServer(parseHostHeader(request.headers.host ?? ''), listeningPort)) {
      runtime.logger.warn({ host: request.headers.host }, 'MCP HTTP request refused: Host not allowed');
      response.writeHead(421, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: 'this Host is not served here' }));
      return;
    }
    const presented = request.headers.authorization?.startsWith('Bearer ')
      ? request.headers.authorization.slice('Bearer '.length)
      : undefined;
    if (options.token !== undefined && (presented === undefined || !secretsEqual(presented, options.token))) {
      response.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' });
      response.end(JSON.stringify({ error: 'a Bearer token (the gateway token) is required' }));
      return;
    }
    if (request.method !== 'POST') {
      // Stateless: no server-initiated stream and no session to delete.
      response.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    const server = createAgentdMcpServer(runtime, McpServer);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    response.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(request, response);
  };
  const http: Server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      runtime.logger.error({ err: error }, 'MCP HTTP request failed');
      if (!response.headersSent) response.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(options.port, options.host, () => resolve());
  });
  const { port } = http.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${host}:${port}/mcp`,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
