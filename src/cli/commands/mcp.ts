import type { Command } from 'commander';
import type { AgentdConfig } from '../../config/index.js';
import type { McpServerStatus } from '../../mcp/index.js';
import type { Runtime } from '../../runtime.js';
import { ErrorCodes, UserInputError } from '../../util/index.js';
import { loadRuntime } from '../lazy-modules.js';
import { type CliIo, ExitCodes, printJson, reportError } from '../output.js';

export interface McpCommandDeps {
  config(): Promise<AgentdConfig>;
  io: CliIo;
  setExitCode(code: number): void;
}

function printServers(io: CliIo, servers: McpServerStatus[]): void {
  if (servers.length === 0) {
    io.stdout('No MCP servers configured (mcp.servers in agentd.yaml).\n');
    return;
  }
  for (const server of servers) {
    io.stdout(`${server.name}  ${server.transport}  ${server.state}  ${server.tools.length} tool(s)\n`);
    if (server.lastError) io.stdout(`  error: ${server.lastError}\n`);
    for (const tool of server.tools)
      io.stdout(`  ${tool.name}${tool.description ? `  ${tool.description.split('\n')[0]}` : ''}\n`);
    if (server.skippedTools?.length) io.stdout(`  not registered: ${server.skippedTools.join(', ')}\n`);
  }
}

export function registerMcpCommands(program: Command, deps: McpCommandDeps): Command {
  const mcp = program.command('mcp').description('Model Context Protocol: servers agentd uses as tools');

  mcp
    .command('list')
    .description('connect to each configured MCP server once and show its state and tools')
    .option('--json', 'print JSON')
    .action(async (options: { json?: boolean }) => {
      const json = options.json ?? false;
      try {
        const servers = await (await loadRuntime()).checkMcpServers(await deps.config());
        // The listing shows the state the first attempt reached, not the `closed` the shutdown left.
        if (json) printJson(deps.io, { servers });
        else printServers(deps.io, servers);
        if (servers.some((server) => server.state === 'failed')) deps.setExitCode(ExitCodes.unavailable);
      } catch (error) {
        deps.setExitCode(reportError(deps.io, error, json));
      }
    });

  mcp
    .command('serve')
    .description(
      'expose agentd over MCP (chat, goal, memory_search, work_submit/get/list, workflow_run): stdio by default',
    )
    .option('--http', 'serve Streamable HTTP at http://<host>:<port>/mcp instead of stdio')
    .option('-p, --port <port>', 'HTTP port (default 7778; 0 picks a free one)')
    .option('-H, --host <host>', 'HTTP interface (default 127.0.0.1)')
    .option('--no-auth', 'HTTP without the Bearer token (development only; loopback hosts only)')
    .action(async (options: { http?: boolean; port?: string; host?: string; auth: boolean }) => {
      let runtime: Runtime | undefined;
      try {
        const { createRuntime, serveAgentdMcpStdio, startAgentdMcpHttpServer } = await loadRuntime();
        runtime = await createRuntime({ config: await deps.config() });
        await runtime.startBackground();
        const active = runtime;
        // A client's first `chat` call comes after its handshake; the turn's loading is done meanwhile.
        void active.prepare();
        const stopped = new Promise<void>((resolve) => {
          process.once('SIGINT', () => resolve());
          process.once('SIGTERM', () => resolve());
        });
        if (options.http) {
          const host = options.host ?? '127.0.0.1';
          const port = options.port === undefined ? 7778 : Number(options.port);
          if (!Number.isInteger(port) || port < 0 || port > 65535)
            throw new UserInputError({ code: ErrorCodes.invalidRequest, message: `--port must be 0–65535` });
          if (!options.auth && !['127.0.0.1', 'localhost', '::1'].includes(host))
            throw new UserInputError({
              code: ErrorCodes.invalidRequest,
              message: '--no-auth is only allowed on a loopback host',
            });
          const http = await startAgentdMcpHttpServer(active, {
            host,
            port,
            token: options.auth ? active.state.token : undefined,
          });
          // One JSON line, so scripts and tests can read where to connect.
          deps.io.stdout(`${JSON.stringify({ url: http.url, auth: options.auth ? 'bearer' : 'none' })}\n`);
          await stopped;
          await http.close();
        } else {
          // stdout carries the protocol; logs go to stderr.
          await serveAgentdMcpStdio(active, stopped);
        }
      } catch (error) {
        deps.setExitCode(reportError(deps.io, error, false));
      } finally {
        await runtime?.close().catch(() => {});
      }
    });

  return mcp;
}
