import type { Command, Option } from 'commander';

/**
 * Joins each option that takes a value to that value when the value begins with `-`: `--token -cX` becomes
 * `--token=-cX`, `-a -mX` becomes `-a-mX`.
 *
 * Why: commander lets every command on the path read its own options anywhere on the line, so the root reads
 * `-cX` as its `-c X` (`--config`) before `submit` sees it as `--token`'s value, and `submit` then takes the
 * next argument (`--json`, say) as the token. A generated token begins with `-c` or `-m` once in about 2,000.
 * Joined, the value is one argument that only the option's owner recognises, which is what commander does for
 * that owner anyway: an option with a required value takes the next argument whatever it looks like.
 */
export function joinOptionValues(program: Command, argv: readonly string[]): string[] {
  const joined = argv.slice(0, 2);
  let commands = [program];
  for (let index = 2; index < argv.length; index++) {
    const argument = argv[index]!;
    if (argument === '--') {
      joined.push(...argv.slice(index));
      break;
    }
    const option = argument.startsWith('-') ? findOption(commands, argument) : undefined;
    if (option?.required) {
      const value = argv[index + 1];
      if (value === undefined) {
        joined.push(argument);
      } else if (value.startsWith('-')) {
        joined.push(argument.startsWith('--') ? `${argument}=${value}` : `${argument}${value}`);
        index++;
      } else {
        joined.push(argument, value);
        index++;
      }
      continue;
    }
    joined.push(argument);
    if (option || argument.startsWith('-')) continue;
    const subcommand = commands
      .at(-1)!
      .commands.find((command) => command.name() === argument || command.aliases().includes(argument));
    if (subcommand) commands = [...commands, subcommand];
  }
  return joined;
}

function findOption(commands: readonly Command[], flag: string): Option | undefined {
  for (const command of commands) {
    const option = command.options.find((candidate) => candidate.long === flag || candidate.short === flag);
    if (option) return option;
  }
  return undefined;
}
