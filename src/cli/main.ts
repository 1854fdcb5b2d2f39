import { Command, CommanderError, Option } from 'commander';
import type { AgentdConfig } from '../config/index.js';
import { ErrorCodes, packageVersion, SystemError } from '../util/index.js';
import type { RunAgentWithTools } from '../workflow/index.js';
import { argvForCommander } from './argv.js';
import { registerAcpCommand } from './commands/acp.js';
import { registerChatCommands } from './commands/chat.js';
import { registerGoalCommand } from './commands/goal.js';
import { registerMcpCommands } from './commands/mcp.js';
import { registerServeCommand } from './commands/serve.js';
import { registerSkillCommands } from './commands/skills.js';
import { registerStatusCommands } from './commands/status.js';
import { registerWorkCommands } from './commands/work.js';
import { registerWorkflowCommands } from './commands/workflow.js';
import { loadRuntime } from './lazy-modules.js';
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
  /**
   * What the workflow commands take from the runtime and the configuration, loaded by their `prepare` before
   * an engine is made.
   */
  let workflowSupport:
    | {
        runtime: Awaited<ReturnType<typeof loadRuntime>>;
        config: AgentdConfig;
        runAgentWithTools: RunAgentWithTools;
      }
    | undefined;
  const prepared = () => {
    if (!workflowSupport)
      throw new SystemError({
        code: ErrorCodes.internal,
        message: 'a workflow command used the runtime before prepare',
      });
    return workflowSupport;
  };
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
    openWork: async () => (await loadRuntime()).openStandaloneWork(await configFrom(globals(), {}, true)),
  });

  registerSkillCommands(program, {
    io,
    setExitCode: (code) => {
      exitCode = code;
    },
    openSkills: async () => (await loadRuntime()).openStandaloneSkills(await configFrom(globals(), {}, true)),
  });

  registerGoalCommand(program, commandDeps);

  registerWorkflowCommands(program, {
    prepare: async () => {
      if (workflowSupport) return;
      const runtime = await loadRuntime();
      workflowSupport = {
        runtime,
        config: await configFrom(globals(), {}, true),
        runAgentWithTools: runtime.createStandaloneWorkflowRunner(),
      };
    },
    resolveModel: (name, override) =>
      prepared().runtime.resolveStandaloneModel(prepared().config, name, override),
    storeLocation: async () => {
      const { home, databaseUrl } = await configFrom(globals(), {}, true);
      return { stateDir: home, ...(databaseUrl ? { databaseUrl } : {}) };
    },
    stdout: io.stdout,
    stderr: io.stderr,
    modelOverride: () => globals().model,
    runAgentWithTools: (...args) => prepared().runAgentWithTools(...args),
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
    await program.parseAsync(argvForCommander(program, argv));
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? ExitCodes.ok : ExitCodes.usage;
    }
    return reportError(io, error, argv.includes('--json'));
  }
  return exitCode();
}
