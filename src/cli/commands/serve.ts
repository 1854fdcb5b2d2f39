import type { Command } from 'commander';
import type { AgentdConfig } from '../../config/index.js';
import type { Runtime } from '../../runtime.js';
import { loadRuntime } from '../lazy-modules.js';
import { parsePortOption } from '../options.js';
import { type CliIo, printJson, reportError } from '../output.js';
import { terminalLogDestination } from '../pretty-log.js';

export interface ServeCommandDeps {
  /** The configuration with `serve`'s own overrides (port, host) applied. */
  config(extra: Partial<Pick<AgentdConfig, 'host' | 'port'>>): Promise<AgentdConfig>;
  io: CliIo;
  setExitCode(code: number): void;
}

/** `agentd serve`: the gateway, the dashboard and the background work, until SIGINT or SIGTERM. */
export function registerServeCommand(program: Command, deps: ServeCommandDeps): Command {
  const { io } = deps;
  /**
   * A fresh install shows one agent in the world: `main`, wandering on the offline rules (no model tokens).
   * Only when no agent was ever spawned or configured, so a terminated `main` stays gone.
   */
  const ensureDefaultWorldAgent = async (runtime: Runtime) => {
    const agents = runtime.work.agents;
    if (!agents || runtime.config.agents.length > 0 || agents.listStates().length > 0) return;
    const row = await runtime.store.db.get<{ count: number }>('SELECT COUNT(*) AS count FROM agents');
    if (Number(row?.count ?? 0) > 0) return;
    await agents.spawn({
      id: 'main',
      name: 'Main',
      role: 'the default agent',
      position: { x: 500, y: 300 },
      decisionLoop: { intervalMs: 4_000 },
    });
  };

  program
    .command('serve')
    .description('run the gateway (HTTP + WebSocket) with the store, the model and the default workspace')
    .option('-p, --port <port>', 'port (default 7777)', parsePortOption)
    .option('-H, --host <host>', 'interface to bind (default 127.0.0.1)')
    .option('--no-auth', 'development only: accept clients without a token (loopback hosts only)')
    .option('--json', 'print the start-up line as JSON')
    .action(async (options: { port?: number; host?: string; auth: boolean; json?: boolean }) => {
      let runtime: Runtime | undefined;
      try {
        const config = await deps.config({
          ...(options.port !== undefined ? { port: options.port } : {}),
          ...(options.host ? { host: options.host } : {}),
        });
        const { createRuntime } = await loadRuntime();
        runtime = await createRuntime({ config, ...terminalLogDestination() });
        const { url: gatewayUrl } = await runtime.startGateway({ noAuth: !options.auth });
        await ensureDefaultWorldAgent(runtime);
        const url = gatewayUrl.replace(/^ws/, 'http');
        const wsUrl = url.replace(/^http/, 'ws');
        // The token travels in the fragment, which browsers never send to the server.
        const dashboard = options.auth
          ? `${url}/#token=${encodeURIComponent(runtime.state.token)}`
          : `${url}/`;
        const started = {
          url,
          dashboard,
          websocket: wsUrl,
          token: runtime.state.token,
          tokenFile: runtime.config.token ? undefined : `${runtime.state.home}/token`,
          store: runtime.store.mode,
          model: runtime.modelName,
          home: runtime.state.home,
          ...(runtime.store.degradedReason ? { degraded: runtime.store.degradedReason } : {}),
        };
        if (options.json) printJson(io, started);
        else {
          io.stdout(`agentd ${runtime.version} listening on ${url}\n`);
          io.stdout(`  dashboard: ${dashboard}\n`);
          io.stdout(`  websocket: ${wsUrl}  (Spiderweb: ${wsUrl}/v1/agents/main/stream?session=main)\n`);
          io.stdout(`  token:     ${runtime.state.token}\n`);
          io.stdout(
            `  store:     ${runtime.store.mode}  model: ${runtime.modelName}  home: ${runtime.state.home}\n`,
          );
          if (runtime.store.degradedReason)
            io.stderr(`WARNING: running RAM-only, nothing will be kept: ${runtime.store.degradedReason}\n`);
        }
        // Clients connect after this line: the first turn's loading is done while they do.
        void runtime.prepare();
        const active = runtime;
        await new Promise<void>((resolve) => {
          let stopping = false;
          const stop = (signal: string) => {
            if (stopping) return;
            stopping = true;
            active.logger.info({ signal }, 'shutting down');
            active.close().then(resolve, (error) => {
              active.logger.error({ err: error }, 'shutdown failed');
              resolve();
            });
          };
          process.once('SIGINT', () => stop('SIGINT'));
          process.once('SIGTERM', () => stop('SIGTERM'));
        });
        if (!options.json) io.stdout('agentd stopped\n');
      } catch (error) {
        await runtime?.close().catch(() => {});
        deps.setExitCode(reportError(io, error, options.json ?? false));
      }
    });

  return program;
}
