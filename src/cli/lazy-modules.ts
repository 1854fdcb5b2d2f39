import type { Command } from 'commander';

// The subsystems a command uses, imported when its action runs rather than when the CLI starts: `--version`,
// `--help` and the commands that only talk to a running gateway start without them (docs/cli.md).
export const loadRuntime = () => import('../runtime.js');
/** The configuration's loader and schemas (zod, yaml): a command that only talks to a gateway reads none. */
export const loadConfigModule = () => import('../config/index.js');
export const loadStore = () => import('../store/index.js');
export const loadModel = () => import('../model/index.js');
export const loadWorkflowEngine = async () => (await import('../workflow/index.js')).loadWorkflowEngine();
export const loadWork = () => import('../work/index.js');
export const loadLedger = () => import('../ledger/index.js');
export const loadSkills = () => import('../skills/index.js');

/**
 * Has `fill` complete the help texts of `group`'s commands from a subsystem before `group` parses its
 * arguments, when they ask for help (`--help`, `-h`, `help <command>`): a command that prints no help does
 * not load the subsystem for it.
 */
export function fillHelpWhenAsked(program: Command, group: Command, fill: () => Promise<void>): void {
  program.hook('preSubcommand', async (root, subcommand) => {
    if (subcommand === group && root.args.some((arg) => arg === '--help' || arg === '-h' || arg === 'help'))
      await fill();
  });
}
