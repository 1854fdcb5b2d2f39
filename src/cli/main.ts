import { join } from 'node:path';
import { Command, CommanderError, Option } from 'commander';
import { createBus } from '../bus/index.js';
import { providerSettings } from '../config/index.js';
import { createLedger } from '../ledger/index.js';
import { defaultModelName, type ProviderCredentials, resolveModel } from '../model/index.js';
import { createWorkflowAgentRunner, packageVersion } from '../runtime.js';
import { createSkillExperience, createSkillLibrary, skillsConfigSchema } from '../skills/index.js';
import { createStore } from '../store/index.js';
import { createIdGenerator, silentLogger } from '../util/index.js';
import { createWorkQueue, workConfigSchema } from '../work/index.js';
import { registerAcpCommand } from './commands/acp.js';
import { registerChatCommands } from './commands/chat.js';
import { registerGoalCommand } from './commands/goal.js';
import { registerMcpCommands } from './commands/mcp.js';
import { registerServeCommand } from './commands/serve.js';
import { registerSkillCommands } from './commands/skills.js';
import { registerStatusCommands } from './commands/status.js';
import { registerWorkCommands } from './commands/work.js';
import { registerWorkflowCommands } from './commands/workflow.js';
import { configFrom, type GlobalOptions } from './options.js';
import { type CliIo, ExitCodes, processIo, reportError } from './output.js';

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
  registerServeCommand(program, {
    config: (extra) => configFrom(globals(), extra),
    io,
    setExitCode: commandDeps.setExitCode,
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

  registerGoalCommand(program, commandDeps);

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
