import type { Command, Option } from 'commander';

/** What an option on a command line looks like: `-x`, `-xyz`, `--name`, `--name=value`. */
const optionShaped = /^(-[A-Za-z]\S*|--[A-Za-z][A-Za-z0-9-]*(=[\s\S]*)?)$/;

/**
 * Prepares a command line for commander, which reads every argument that begins with `-` as an option:
 *
 * - An option that takes a value is joined to that value when the value begins with `-`: `--token -cX`
 *   becomes `--token=-cX`, `-a -mX` becomes `-a-mX`. Commander lets every command on the path read its own
 *   options anywhere on the line, so the root read `-cX` as its `-c X` (`--config`) before `submit` saw it
 *   as `--token`'s value, and `submit` then took the next argument (`--json`, say) as the token. A generated
 *   token began with `-c` or `-m` once in about 2,000. Joined, the value is one argument that only the
 *   option's owner recognises, which is what commander does for that owner anyway: an option with a
 *   required value takes the next argument whatever it looks like.
 * - Text that begins with `-` but cannot be an option (`"- buy milk"`, `"-5 degrees"`) is an operand: it
 *   and the operands after it move behind a `--`, in their order, where commander takes them as they are.
 *   Without this a Markdown list item sent as a message was refused as an unknown option.
 */
export function argvForCommander(program: Command, argv: readonly string[]): string[] {
  const joined = argv.slice(0, 2);
  // Operands from the first that looks like an option but is not one; they go behind `--`.
  const moved: string[] = [];
  let commands = [program];
  for (let index = 2; index < argv.length; index++) {
    const argument = argv[index]!;
    if (argument === '--') {
      joined.push('--', ...moved, ...argv.slice(index + 1));
      return joined;
    }
    const option = argument.startsWith('-') ? findOption(commands, argument) : undefined;
    if (option?.required && index + 1 < argv.length) {
      const value = argv[++index]!;
      if (!value.startsWith('-')) joined.push(argument, value);
      else joined.push(argument.startsWith('--') ? `${argument}=${value}` : `${argument}${value}`);
      continue;
    }
    // A known short option with its value attached (`-smy session`) is one whatever the value holds.
    const attached = /^-[A-Za-z]/.test(argument) && findOption(commands, argument.slice(0, 2)) !== undefined;
    if (option || attached || optionShaped.test(argument)) {
      joined.push(argument);
      continue;
    }
    if (moved.length > 0 || argument.startsWith('-')) {
      moved.push(argument);
      continue;
    }
    joined.push(argument);
    const subcommand = commands
      .at(-1)!
      .commands.find((command) => command.name() === argument || command.aliases().includes(argument));
    if (subcommand) commands = [...commands, subcommand];
  }
  if (moved.length > 0) joined.push('--', ...moved);
  return joined;
}

function findOption(commands: readonly Command[], flag: string): Option | undefined {
  for (const command of commands) {
    const option = command.options.find((candidate) => candidate.long === flag || candidate.short === flag);
    if (option) return option;
  }
  return undefined;
}
