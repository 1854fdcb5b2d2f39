import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterEach, describe, expect, it } from 'vitest';
import { argvForCommander } from '../../src/cli/argv.js';
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

    // The same for a value-taking option of the command itself.
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
    const argv = (...rest: string[]) => argvForCommander(program, ['node', 'agentd', ...rest]);

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

describe('an operand that begins with -', () => {
  it('is text, not an unknown option, when it cannot be one: a Markdown list item as a message', async () => {
    const home = tempHome();
    const sent = await run(['send', '- buy milk', '--home', home, '--json']);
    expect(sent.code, sent.err).toBe(0);
    expect(JSON.parse(sent.out).text).toContain('- buy milk');

    // The operands keep their order, the options after them still hold, and an option-shaped word is still
    // an unknown option.
    const submitted = await run([
      'work',
      'submit',
      'task',
      '-5 degrees',
      'and',
      '- ice',
      '--home',
      home,
      '--json',
    ]);
    expect(submitted.code, submitted.err).toBe(0);
    const started = await startRuntime({ home });
    runtime = started.runtime;
    expect((await started.runtime.work.queue.get(JSON.parse(submitted.out).id))?.description).toBe(
      '-5 degrees and - ice',
    );
    const unknown = await run(['send', 'hi', '--frobnicate', '--home', home]);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain("unknown option '--frobnicate'");
  });

  it('moves behind -- with the operands after it, before those already behind one', () => {
    const program = new Command().option('-c, --config <file>');
    program.command('send').argument('[words...]').option('-s, --session <key>').option('--json');
    const argv = (...rest: string[]) => argvForCommander(program, ['node', 'agentd', ...rest]);

    expect(argv('send', 'a', '- b', 'c', '--json', '-s', 'k')).toEqual([
      'node',
      'agentd',
      'send',
      'a',
      '--json',
      '-s',
      'k',
      '--',
      '- b',
      'c',
    ]);
    expect(argv('send', '-5', '--', '--json')).toEqual(['node', 'agentd', 'send', '--', '-5', '--json']);
    // Option-shaped words stay where they are, for commander to take or refuse; so does a known short option
    // with its value attached, spaces and all.
    expect(argv('send', '-x', '--no-such', '-smy session', '--a=b c')).toEqual([
      'node',
      'agentd',
      'send',
      '-x',
      '--no-such',
      '-smy session',
      '--a=b c',
    ]);
    expect(argv('send', '-I think so')).toEqual(['node', 'agentd', 'send', '--', '-I think so']);
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
