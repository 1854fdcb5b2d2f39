import { dirname } from 'node:path';
import type { Command } from 'commander';
import { createBus } from '../../bus/index.js';
import type { AgentdConfig } from '../../config/index.js';
import { createMcpClientManager, type McpServerStatus, mcpConfigSchema } from '../../mcp/index.js';
import { parseSection } from '../../runtime/config-section.js';
import { createToolRegistry } from '../../tools/index.js';
import { silentLogger } from '../../util/logger.js';
import { type CliIo, ExitCodes, printJson, reportError } from '../output.js';

export interface McpCommandDeps {
  config(): AgentdConfig;
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
        const config = deps.config();
        const manager = createMcpClientManager({
          config: parseSection(mcpConfigSchema, config.sections.mcp, 'mcp'),
          registry: createToolRegistry(),
          bus: createBus(),
          logger: silentLogger,
          ...(config.configPath ? { cwd: dirname(config.configPath) } : {}),
        });
        await manager.start();
        const servers = manager.list();
        await manager.close();
        // The listing shows the state the first attempt reached, not the `closed` the shutdown left.
        if (json) printJson(deps.io, { servers });
        else printServers(deps.io, servers);
        if (servers.some((server) => server.state === 'failed')) deps.setExitCode(ExitCodes.unavailable);
      } catch (error) {
        deps.setExitCode(reportError(deps.io, error, json));
      }
    });

  return mcp;
}
