import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterEach, describe, expect, it } from 'vitest';
import { joinOptionValues } from '../../src/cli/argv.js';
import { newGatewayToken } from '../../src/runtime/state-dir.js';
import type { Runtime } from '../../src/runtime.js';
import { startRuntime, tempHome } from '../runtime/helpers.js';
import { runCli as run } from './helpers.js';

let runtime: Runtime | undefined;
afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
});

describe('an option value that begins with -', () => {
  // `-c` and `-m` are the root's own short options (--config, --model); `-x` is nobody's.
  it.each([
    '-cAbCdEfGhIjKlMnOpQrStUvWx',
    '-mAbCdEfGhIjKlMnOpQrStUvWx',
    '--AbCdEfGhIjKlMnOpQrStUvWx',
    '-xAbCdEfGhIjKlMnOpQrStUvWx',
  ])('is --token %s, not a root option, and --json after it still holds', async (token) => {
    const home = tempHome();
    writeFileSync(join(home, 'token'), `${token}\n`);
    writeFileSync(join(home, 'agentd.yaml'), 'features:\n  workers_v1: false\n');
    const started = await startRuntime({ home });
    runtime = started.runtime;
    expect(started.runtime.state.token).toBe(token);

    const submitted = await run([
      'work',
      'submit',
      'task',
      'Mend',
      '--url',
      started.url,
      '--token',
      token,
      '--json',
    ]);
    expect(submitted.code, `stdout: ${submitted.out}, stderr: ${submitted.err}`).toBe(0);
    const { id } = JSON.parse(submitted.out) as { id: string };
    expect((await started.runtime.work.queue.get(id))?.description).toBe('Mend');

    // The same for a value-taking option of the command itself and a short option: --reason, -a.
    const blocked = await run([
      'work',
      'block',
      id,
      '--reason',
      '-can opener missing',
      '--url',
      started.url,
      '--token',
      token,
    ]);
    expect(blocked.out).toBe(`${id} blocked: -can opener missing\n`);
  });

  it('joins a value to its option the way the option’s owner reads it, and leaves the rest alone', () => {
    const program = new Command().option('-c, --config <file>').option('--verbose');
    const send = program.command('send').argument('[words...]').option('-a, --agent <id>').option('--json');
    const argv = (...rest: string[]) => joinOptionValues(program, ['node', 'agentd', ...rest]);

    expect(argv('send', 'hi', '-a', '-main', '--json')).toEqual([
      'node',
      'agentd',
      'send',
      'hi',
      '-a-main',
      '--json',
    ]);
    expect(argv('send', '--agent', '-cx', '--json')).toEqual([
      'node',
      'agentd',
      'send',
      '--agent=-cx',
      '--json',
    ]);
    expect(argv('--config', '-a', 'send')).toEqual(['node', 'agentd', '--config=-a', 'send']);
    // A value that does not begin with - stays a word of its own, and so does the word after it.
    expect(argv('send', '--agent', 'main', '-cfile')).toEqual([
      'node',
      'agentd',
      'send',
      '--agent',
      'main',
      '-cfile',
    ]);
    // An option of a command not on the line is not one here; after -- nothing is an option.
    expect(argv('--agent', '-cx')).toEqual(['node', 'agentd', '--agent', '-cx']);
    expect(argv('send', '--', '--agent', '-cx')).toEqual(['node', 'agentd', 'send', '--', '--agent', '-cx']);
    expect(argv('send', '--agent')).toEqual(['node', 'agentd', 'send', '--agent']);
    expect(argv('--verbose', '-cx')).toEqual(['node', 'agentd', '--verbose', '-cx']);

    const seen: Record<string, unknown> = {};
    send.action((_words, options) => Object.assign(seen, options, { config: program.opts().config }));
    program.parse(argv('send', '--agent', '-cx', '--json'));
    expect(seen).toEqual({ agent: '-cx', json: true, config: undefined });
  });
});

describe('a generated gateway token', () => {
  it('never begins with -, drawing again when the bytes would make it', () => {
    // 0xf8 encodes to "-" as the first base64url character.
    const draws = [Buffer.alloc(24, 0xf8), Buffer.alloc(24, 0x41)];
    const token = newGatewayToken(() => draws.shift()!);
    expect(draws).toEqual([]);
    expect(token).toBe(Buffer.alloc(24, 0x41).toString('base64url'));
    expect(Buffer.alloc(24, 0xf8).toString('base64url').startsWith('-')).toBe(true);
  });
});
