import { join } from 'node:path';
import { Command, CommanderError, Option } from 'commander';
import { createBus } from '../bus/index.js';
import { providerSettings } from '../config/index.js';
import { createLedger } from '../ledger/index.js';
import { defaultModelName, type ProviderCredentials, resolveModel } from '../model/index.js';
import { createRuntime, createWorkflowAgentRunner, packageVersion, type Runtime } from '../runtime.js';
import { createSkillExperience, createSkillLibrary, skillsConfigSchema } from '../skills/index.js';
import { createStore } from '../store/index.js';
import { AgentdError, createIdGenerator, ErrorCodes, silentLogger, UserInputError } from '../util/index.js';
import { createWorkQueue, workConfigSchema } from '../work/index.js';
import { registerAcpCommand } from './commands/acp.js';
import { registerChatCommands } from './commands/chat.js';
import { registerMcpCommands } from './commands/mcp.js';
import { registerSkillCommands } from './commands/skills.js';
import { registerStatusCommands } from './commands/status.js';
import { registerWorkCommands } from './commands/work.js';
import { registerWorkflowCommands } from './commands/workflow.js';
import { configFrom, type GlobalOptions, parsePortOption, parsePositiveInt } from './options.js';
import { type CliIo, ExitCodes, printJson, processIo, reportError } from './output.js';
import { connectFromOptions, type RemoteOptions, sessionKeyFor } from './remote.js';

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
  const commandDeps = {
    config: () => configFrom(globals(), {}, true),
    io,
    setExitCode: (code: number) => {
      exitCode = code;
    },
  };
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

  registerChatCommands(program, commandDeps);

  registerStatusCommands(program, commandDeps);

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
              show(`· ${event.data.message}`),
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

  registerMcpCommands(program, commandDeps);
  registerAcpCommand(program, commandDeps);

  program.addOption(
    new Option('--log-level <level>', 'fatal, error, warn, info (serve), debug, trace or silent').env(
      'AGENTD_LOG_LEVEL',
    ),
  );
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
