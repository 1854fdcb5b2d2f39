import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Command, CommanderError, Option } from 'commander';
import { createBus } from '../bus/index.js';
import { type AgentdConfig, loadConfig, providerSettings } from '../config/index.js';
import { createLedger } from '../ledger/index.js';
import { defaultModelName, type ProviderCredentials, resolveModel } from '../model/index.js';
import { packageVersion } from '../runtime/state-dir.js';
import { createWorkflowAgentRunner } from '../runtime/workflow-agent.js';
import { createRuntime, type Runtime } from '../runtime.js';
import { createSkillExperience, createSkillLibrary, skillsConfigSchema } from '../skills/index.js';
import { createStore } from '../store/index.js';
import { AgentdError, ErrorCodes, UserInputError } from '../util/errors.js';
import { createIdGenerator } from '../util/ids.js';
import { silentLogger } from '../util/logger.js';
import { createWorkQueue, workConfigSchema } from '../work/index.js';
import { registerAcpCommand } from './commands/acp.js';
import { registerMcpCommands } from './commands/mcp.js';
import { registerSkillCommands } from './commands/skills.js';
import { registerWorkCommands } from './commands/work.js';
import { registerWorkflowCommands } from './commands/workflow.js';
import { connectGateway, type GatewayClient } from './gateway-client.js';
import { type CliIo, ExitCodes, printJson, processIo, reportError } from './output.js';

interface GlobalOptions {
  config?: string;
  home?: string;
  model?: string;
}

interface RemoteOptions {
  url?: string;
  token?: string;
}

function configFrom(
  globals: GlobalOptions,
  extra: Partial<Pick<AgentdConfig, 'host' | 'port'>> = {},
  quiet = false,
): AgentdConfig {
  const config = loadConfig({
    ...(globals.config ? { configPath: globals.config } : {}),
    overrides: {
      ...(globals.home ? { home: globals.home } : {}),
      ...(globals.model ? { model: globals.model } : {}),
      ...extra,
    },
  });
  // One-shot commands keep stderr quiet unless the user asked for a log level.
  if (quiet && !process.env.AGENTD_LOG_LEVEL) config.logLevel = 'warn';
  return config;
}

function parsePortOption(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `--port must be 0–65535, got "${value}"`,
    });
  }
  return port;
}

function parsePositiveInt(name: string) {
  return (value: string): number => {
    const number = Number(value);
    if (!Number.isInteger(number) || number <= 0) {
      throw new UserInputError({
        code: ErrorCodes.invalidRequest,
        message: `${name} must be a positive integer, got "${value}"`,
      });
    }
    return number;
  };
}

function remoteToken(options: RemoteOptions): string | undefined {
  return options.token ?? process.env.AGENTD_TOKEN;
}

/** Connects to the `--url` gateway with `--token` (or $AGENTD_TOKEN). */
function connectFromOptions(options: RemoteOptions): Promise<GatewayClient> {
  const token = remoteToken(options);
  return connectGateway({ url: options.url!, ...(token ? { token } : {}) });
}

function sessionKeyFor(agent: string, session: string | undefined): string {
  if (!session) return `agent:${agent}:main`;
  return session.startsWith('agent:') ? session : `agent:${agent}:${session}`;
}

/** Sends one turn over the gateway and resolves with the final text, streaming deltas to `onDelta`. */
async function remoteTurn(
  client: GatewayClient,
  sessionKey: string,
  text: string,
  timeoutMs: number,
  onDelta: (delta: string) => void,
) {
  const idempotencyKey = `cli-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
  return new Promise<{
    runId: string;
    status: string;
    text: string;
    error?: { code: string; message: string };
  }>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new AgentdError({
            code: ErrorCodes.timeout,
            message: `no final reply within ${timeoutMs} ms`,
            fault: 'system',
          }),
        ),
      timeoutMs,
    );
    const off = client.onEvent((event, payload) => {
      if (event !== 'chat' || payload?.runId !== idempotencyKey) return;
      if (payload.state === 'delta' && typeof payload.deltaText === 'string') onDelta(payload.deltaText);
      if (payload.state === 'final' || payload.state === 'aborted' || payload.state === 'error') {
        clearTimeout(timer);
        off();
        const finalText =
          payload.message?.content?.map((part: { text?: string }) => part.text ?? '').join('') ?? '';
        resolve({
          runId: idempotencyKey,
          status: payload.state === 'final' ? 'completed' : payload.state,
          text: finalText,
          ...(payload.state === 'error'
            ? {
                error: {
                  code: payload.errorKind ?? 'ERROR',
                  message: payload.errorMessage ?? 'the run failed',
                },
              }
            : {}),
        });
      }
    });
    client.call('chat.send', { sessionKey, message: text, idempotencyKey }).catch((error) => {
      clearTimeout(timer);
      off();
      reject(error);
    });
  });
}

function withTimeout<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new AgentdError({
            code: ErrorCodes.timeout,
            message: `the tasks did not finish within ${timeoutMs} ms; they keep running`,
            fault: 'system',
          }),
        ),
      timeoutMs,
    );
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

function printPlan(
  io: CliIo,
  json: boolean,
  plan: { planId: string; reply: string; tasks: Array<{ title: string; workItemId: string }> },
  synthesis: string | undefined,
) {
  if (json) {
    printJson(io, {
      planId: plan.planId,
      reply: plan.reply,
      tasks: plan.tasks,
      ...(synthesis !== undefined ? { synthesis } : {}),
    });
    return;
  }
  io.stdout(`${plan.reply}\n`);
  for (const [index, task] of plan.tasks.entries())
    io.stdout(`  ${index + 1}. ${task.title}  (${task.workItemId})\n`);
  if (synthesis !== undefined) io.stdout(`\n${synthesis}\n`);
}

export function buildProgram(io: CliIo = processIo): { program: Command; exitCode: () => number } {
  let exitCode: number = ExitCodes.ok;
  const program = new Command()
    .name('agentd')
    .description(
      'agentd — an agent runtime: chat gateway, memory, planner and workers, engage loop, workflows',
    )
    .version(packageVersion())
    .option('-c, --config <file>', 'agentd.yaml to read')
    .option('--home <dir>', 'state directory (default $AGENTD_HOME or ./.agentd)')
    .option(
      '-m, --model <provider/model>',
      'model to use (default $AGENTD_MODEL, else the first provider with a key, else local)',
    )
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr })
    .exitOverride();

  const globals = () => program.opts<GlobalOptions>();
  const fail = (error: unknown, json: boolean) => {
    exitCode = reportError(io, error, json);
  };

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
        const config = configFrom(globals(), {
          ...(options.port !== undefined ? { port: options.port } : {}),
          ...(options.host ? { host: options.host } : {}),
        });
        runtime = await createRuntime({ config });
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
        fail(error, options.json ?? false);
      }
    });

  program
    .command('send')
    .description('send one chat message and print the reply (in-process, or to a running server with --url)')
    .argument('<text>', 'the message')
    .option('-a, --agent <id>', 'agent id', 'main')
    .option('-s, --session <key>', 'session key (default agent:<agent>:main)')
    .option('--url <url>', 'a running agentd gateway, e.g. ws://127.0.0.1:7777')
    .option('--token <token>', 'gateway token (default $AGENTD_TOKEN)')
    .option('--timeout-ms <ms>', 'give up after this long', parsePositiveInt('--timeout-ms'), 120_000)
    .option('--json', 'print the result as JSON')
    .action(
      async (
        text: string,
        options: RemoteOptions & { agent: string; session?: string; timeoutMs: number; json?: boolean },
      ) => {
        const json = options.json ?? false;
        const sessionKey = sessionKeyFor(options.agent, options.session);
        let result: {
          runId: string;
          status: string;
          text: string;
          error?: { code: string; message: string };
        };
        try {
          if (options.url) {
            const client = await connectFromOptions(options);
            try {
              result = await remoteTurn(client, sessionKey, text, options.timeoutMs, (delta) => {
                if (!json) io.stdout(delta);
              });
            } finally {
              await client.close();
            }
            if (!json) io.stdout('\n');
          } else {
            const runtime = await createRuntime({ config: configFrom(globals(), {}, true) });
            try {
              const off = runtime.bus.subscribe(
                { sessionKey, types: ['run:text-delta', 'run:tool-started'] },
                (event) => {
                  if (json) return;
                  if (event.type === 'run:text-delta') io.stdout((event.data as { delta: string }).delta);
                  else io.stderr(`[tool ${(event.data as { toolName: string }).toolName}]\n`);
                },
              );
              result = await runtime.sendMessage({
                text,
                agentId: options.agent,
                sessionKey,
                timeoutMs: options.timeoutMs,
              });
              off();
              if (!json) io.stdout('\n');
            } finally {
              await runtime.close();
            }
          }
        } catch (error) {
          fail(error, json);
          return;
        }
        if (json) printJson(io, { sessionKey, ...result });
        if (result.status !== 'completed') {
          if (!json)
            io.stderr(
              `agentd: the run ended with status ${result.status}${result.error ? `: ${result.error.message} (${result.error.code})` : ''}\n`,
            );
          exitCode = ExitCodes.failure;
        }
      },
    );

  program
    .command('chat')
    .description(
      'an interactive chat (in-process, or with a running server with --url); /new, /goal, /stop work here too',
    )
    .option('-a, --agent <id>', 'agent id', 'main')
    .option('-s, --session <key>', 'session key')
    .option('--url <url>', 'a running agentd gateway')
    .option('--token <token>', 'gateway token (default $AGENTD_TOKEN)')
    .option('--json', 'one JSON object per reply instead of streamed text (for scripts driving the REPL)')
    .action(async (options: RemoteOptions & { agent: string; session?: string; json?: boolean }) => {
      const sessionKey = sessionKeyFor(options.agent, options.session);
      const json = options.json ?? false;
      let runtime: Runtime | undefined;
      let client: GatewayClient | undefined;
      try {
        if (options.url) client = await connectFromOptions(options);
        else runtime = await createRuntime({ config: configFrom(globals(), {}, true) });
        if (!json) io.stdout(`agentd chat — session ${sessionKey}. Type a message; /exit quits.\n`);
        const lines = createInterface({ input: process.stdin, terminal: process.stdin.isTTY ?? false });
        const write = (delta: string) => {
          if (!json) io.stdout(delta);
        };
        const prompt = () => {
          if (!json) io.stdout('> ');
        };
        const off = runtime?.bus.subscribe({ sessionKey, types: ['run:text-delta'] }, (event) =>
          write((event.data as { delta: string }).delta),
        );
        prompt();
        for await (const line of lines) {
          const text = line.trim();
          if (text === '/exit' || text === '/quit') break;
          if (text) {
            const result = client
              ? await remoteTurn(client, sessionKey, text, 600_000, write)
              : await runtime!.sendMessage({ text, agentId: options.agent, sessionKey });
            if (json) io.stdout(`${JSON.stringify({ sessionKey, ...result })}\n`);
            else {
              if (result.status !== 'completed')
                io.stdout(`\n[${result.status}${result.error ? `: ${result.error.message}` : ''}]`);
              io.stdout('\n');
            }
          }
          prompt();
        }
        off?.();
      } catch (error) {
        fail(error, json);
      } finally {
        await client?.close();
        await runtime?.close();
      }
    });

  program
    .command('status')
    .description('runtime status: store, model, sessions, runs (of a running server with --url)')
    .option('--url <url>', 'a running agentd gateway')
    .option('--token <token>', 'gateway token (default $AGENTD_TOKEN)')
    .option('--json', 'print JSON')
    .action(async (options: RemoteOptions & { json?: boolean }) => {
      const json = options.json ?? false;
      try {
        let status: Record<string, unknown>;
        if (options.url) {
          const client = await connectFromOptions(options);
          try {
            status = await client.call<Record<string, unknown>>('status');
          } finally {
            await client.close();
          }
        } else {
          const runtime = await createRuntime({ config: configFrom(globals(), {}, true) });
          try {
            status = (await runtime.services.health.status()) as Record<string, unknown>;
            status.sessions = (await runtime.store.sessions.list({ limit: 1000 })).length;
          } finally {
            await runtime.close();
          }
        }
        if (json) printJson(io, status);
        else
          for (const [key, value] of Object.entries(status))
            io.stdout(
              `${key.padEnd(10)} ${typeof value === 'object' ? JSON.stringify(value) : String(value)}\n`,
            );
      } catch (error) {
        fail(error, json);
      }
    });

  program
    .command('doctor')
    .description('check Node, the store, model credentials and the port')
    .option('--json', 'print JSON')
    .action(async (options: { json?: boolean }) => {
      const json = options.json ?? false;
      const checks: Array<{ check: string; ok: boolean; detail: string }> = [];
      try {
        const config = configFrom(globals(), {}, true);
        const major = Number(process.versions.node.split('.')[0]);
        checks.push({
          check: 'node',
          ok: major >= 20,
          detail: `Node ${process.versions.node} (needs 20 or newer)`,
        });
        try {
          const store = await createStore({
            stateDir: config.home,
            ...(config.databaseUrl ? { databaseUrl: config.databaseUrl } : {}),
            logger: silentLogger,
          });
          checks.push({
            check: 'store',
            ok: store.mode !== 'memory',
            detail:
              store.mode === 'memory'
                ? `RAM-only: ${store.degradedReason}`
                : `${store.mode} at ${store.db.location}`,
          });
          await store.close();
        } catch (error) {
          checks.push({ check: 'store', ok: false, detail: (error as Error).message });
        }
        const credentials = providerSettings(config.credentials);
        const name = config.model ?? defaultModelName(process.env, credentials);
        try {
          resolveModel(name, { credentials });
          checks.push({
            check: 'model',
            ok: true,
            detail: `${name}${config.credentials.length ? ` (credentials: ${config.credentials.map((credential) => credential.source).join(', ')})` : ''}`,
          });
        } catch (error) {
          checks.push({ check: 'model', ok: false, detail: (error as Error).message });
        }
        const portFree = await new Promise<boolean>((resolve) => {
          const server = createServer();
          server.once('error', () => resolve(false));
          server.listen(config.port, config.host, () => server.close(() => resolve(true)));
        });
        checks.push({
          check: 'port',
          ok: portFree,
          detail: `${config.host}:${config.port} ${portFree ? 'is free' : 'is in use (is agentd already running?)'}`,
        });
        for (const warning of config.warnings) checks.push({ check: 'config', ok: false, detail: warning });
      } catch (error) {
        fail(error, json);
        return;
      }
      if (json) printJson(io, { ok: checks.every((check) => check.ok), checks });
      else
        for (const check of checks)
          io.stdout(`${check.ok ? 'ok  ' : 'FAIL'} ${check.check.padEnd(6)} ${check.detail}\n`);
      if (!checks.every((check) => check.ok)) exitCode = ExitCodes.failure;
    });

  registerWorkCommands(program, {
    io,
    setExitCode: (code) => {
      exitCode = code;
    },
    openWork: async () => {
      const config = configFrom(globals(), {}, true);
      const store = await createStore({
        stateDir: config.home,
        ...(config.databaseUrl ? { databaseUrl: config.databaseUrl } : {}),
        logger: silentLogger,
      });
      const queue = createWorkQueue({
        db: store.db,
        bus: createBus(),
        config: workConfigSchema.parse(config.sections.work ?? {}),
      });
      return {
        queue,
        ledger: createLedger({ db: store.db }),
        close: async () => {
          await queue.close();
          await store.close();
        },
      };
    },
  });

  registerSkillCommands(program, {
    io,
    setExitCode: (code) => {
      exitCode = code;
    },
    openSkills: async () => {
      const config = configFrom(globals(), {}, true);
      const store = await createStore({
        stateDir: config.home,
        ...(config.databaseUrl ? { databaseUrl: config.databaseUrl } : {}),
        logger: silentLogger,
      });
      const skillsConfig = skillsConfigSchema.parse(config.sections.skills ?? {});
      const ledger = createLedger({ db: store.db });
      const library = createSkillLibrary({
        dirs: [join(config.home, 'workspace', 'skills')],
        db: store.db,
        ledger,
      });
      const queue = createWorkQueue({
        db: store.db,
        bus: createBus(),
        config: workConfigSchema.parse(config.sections.work ?? {}),
      });
      const experience = createSkillExperience({
        db: store.db,
        ledger,
        library,
        config: skillsConfig.experience,
        proposeWork: (work) => queue.submit({ ...work, source: 'skills' }),
      });
      return {
        library,
        experience,
        staleAfterDays: skillsConfig.staleAfterDays,
        close: async () => {
          await queue.close();
          await store.close();
        },
      };
    },
  });

  program
    .command('goal')
    .description(
      'turn a goal into a plan of work items run by worker agents; waits for the synthesis unless --detach',
    )
    .argument('<text>', 'the goal')
    .option('-a, --agent <id>', 'agent id', 'main')
    .option('-s, --session <key>', 'session key (default agent:<agent>:main)')
    .option('--detach', 'return once the plan is made; the tasks run in the background (on a running server)')
    .option('--url <url>', 'send the goal to a running agentd gateway')
    .option('--token <token>', 'gateway token (default $AGENTD_TOKEN)')
    .option(
      '--timeout-ms <ms>',
      'give up waiting for the tasks after this long',
      parsePositiveInt('--timeout-ms'),
      600_000,
    )
    .option('--json', 'print JSON')
    .action(
      async (
        text: string,
        options: RemoteOptions & {
          agent: string;
          session?: string;
          detach?: boolean;
          timeoutMs: number;
          json?: boolean;
        },
      ) => {
        const json = options.json ?? false;
        const sessionKey = sessionKeyFor(options.agent, options.session);
        const show = (line: string) => {
          if (!json) io.stderr(`${line}\n`);
        };
        try {
          if (options.url) {
            const client = await connectFromOptions(options);
            try {
              // Reading the history subscribes this connection to the session's events.
              await client.call('chat.history', { sessionKey, limit: 1 });
              let planId: string | undefined;
              const pending: any[] = [];
              const synthesis = new Promise<any>((resolve) => {
                client.onEvent((event, payload) => {
                  if (event === 'agent.progress') show(`· ${payload.message}`);
                  if (event === 'agent.synthesis') {
                    if (planId === undefined) pending.push(payload);
                    else if (payload.planId === planId) resolve(payload);
                  }
                });
              });
              const plan = await client.call<{
                planId: string;
                reply: string;
                tasks: Array<{ title: string; workItemId: string }>;
              }>('agent.control', { action: 'goal', goal: text, sessionKey, agentId: options.agent });
              planId = plan.planId;
              const early = pending.find((payload) => payload.planId === planId);
              const finished = options.detach
                ? undefined
                : await withTimeout(early ? Promise.resolve(early) : synthesis, options.timeoutMs);
              printPlan(io, json, plan, finished?.text);
            } finally {
              await client.close();
            }
            return;
          }
          const runtime = await createRuntime({ config: configFrom(globals(), {}, true) });
          try {
            await runtime.startBackground();
            if (!runtime.work.planner)
              throw new UserInputError({
                code: ErrorCodes.invalidConfig,
                message: 'planning is off: features.agent_runtime_v1 is false',
              });
            const off = runtime.bus.subscribe({ sessionKey, types: ['agent:progress'] }, (event) =>
              show(`· ${(event.data as { message: string }).message}`),
            );
            const plan = await runtime.work.planner.plan({ goal: text, sessionKey, agentId: options.agent });
            const finished = options.detach ? undefined : await withTimeout(plan.finished, options.timeoutMs);
            off();
            printPlan(io, json, plan, finished?.text);
            if (options.detach && !json)
              io.stdout(
                'Detached: the tasks stay queued and run when `agentd serve` runs on this state directory.\n',
              );
          } finally {
            await runtime.close();
          }
        } catch (error) {
          fail(error, json);
        }
      },
    );

  const modelFor = (name?: string, override?: { apiKey?: string; baseUrl?: string }) => {
    const config = configFrom(globals(), {}, true);
    const credentials: ProviderCredentials = providerSettings(config.credentials);
    const modelName = name ?? config.model ?? defaultModelName(process.env, credentials);
    const provider = modelName.slice(0, modelName.indexOf('/')).toLowerCase();
    // An override replaces the provider's entry as a whole, so its key only goes to its own base URL.
    if (override?.apiKey || override?.baseUrl)
      credentials[provider] = { apiKey: override.apiKey, baseUrl: override.baseUrl };
    return resolveModel(modelName, { credentials, env: process.env });
  };
  registerWorkflowCommands(program, {
    resolveModel: modelFor,
    get stateDir() {
      return configFrom(globals(), {}, true).home;
    },
    get databaseUrl() {
      return configFrom(globals(), {}, true).databaseUrl;
    },
    stdout: io.stdout,
    stderr: io.stderr,
    modelOverride: () => globals().model,
    runAgentWithTools: createWorkflowAgentRunner({
      bus: createBus(),
      workspaceDir: process.cwd(),
      idGenerator: createIdGenerator(),
      logger: silentLogger,
    }),
    setExitCode: (code) => {
      exitCode = code;
    },
  });

  const commandDeps = {
    config: () => configFrom(globals(), {}, true),
    io,
    setExitCode: (code: number) => {
      exitCode = code;
    },
  };
  registerMcpCommands(program, commandDeps);
  registerAcpCommand(program, commandDeps);

  program.addOption(new Option('--log-level <level>', 'log level').hideHelp().env('AGENTD_LOG_LEVEL'));
  return { program, exitCode: () => exitCode };
}

/** Runs the CLI; resolves with the process exit code. */
export async function main(argv: string[], io: CliIo = processIo): Promise<number> {
  const { program, exitCode } = buildProgram(io);
  try {
    await program.parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? ExitCodes.ok : ExitCodes.usage;
    }
    return reportError(io, error, argv.includes('--json'));
  }
  return exitCode();
}
