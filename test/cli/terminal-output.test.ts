import { resolve } from 'node:path';
import { Command } from 'commander';
import { afterEach, describe, expect, it } from 'vitest';
import { registerWorkflowCommands } from '../../src/cli/commands/workflow.js';
import { main } from '../../src/cli/main.js';
import type { CliIo } from '../../src/cli/output.js';
import { processIo, terminalOf } from '../../src/cli/output.js';
import { createProgressDisplay, showAgentProgress } from '../../src/cli/progress.js';
import { paintState, plainTerminal, processTerminal, type Terminal } from '../../src/cli/terminal.js';
import { resolveModel } from '../../src/model/index.js';
import { tempHome } from '../runtime/helpers.js';

const exampleDir = resolve(import.meta.dirname, '../../examples/mini-editor');
const esc = '\u001b';
const colourTerminal: Terminal = { color: true, progressColor: true, live: true };

async function run(args: string[], terminal?: Terminal) {
  let out = '';
  let err = '';
  const io: CliIo = {
    stdout: (text) => {
      out += text;
    },
    stderr: (text) => {
      err += text;
    },
    ...(terminal ? { terminal } : {}),
  };
  const code = await main(['node', 'agentd', ...args], io);
  return { code, out, err };
}

function workflowCli(terminal?: Terminal) {
  const out: string[] = [];
  const err: string[] = [];
  const program = new Command().exitOverride();
  const stateDir = tempHome('agentd-cli-');
  registerWorkflowCommands(program, {
    resolveModel: (name) => resolveModel(name ?? 'local/agentd-local', { env: {} }),
    storeLocation: async () => ({ stateDir }),
    cwd: tempHome('agentd-cli-'),
    env: {},
    stdout: (text) => out.push(text),
    stderr: (text) => err.push(text),
    setExitCode: () => {},
    ...(terminal ? { terminal } : {}),
  });
  return {
    run: (...args: string[]) => program.parseAsync(['node', 'agentd', ...args]),
    out: () => out.join(''),
    err: () => err.join(''),
  };
}

const restores: Array<() => void> = [];
/** Makes a process stream look like a terminal or not (off a terminal, Node leaves `isTTY` undefined). */
function setTTY(stream: NodeJS.WriteStream, value: boolean) {
  const before = Object.getOwnPropertyDescriptor(stream, 'isTTY');
  Object.defineProperty(stream, 'isTTY', { value, configurable: true, writable: true });
  restores.push(() => {
    if (before) Object.defineProperty(stream, 'isTTY', before);
    else delete (stream as { isTTY?: boolean }).isTTY;
  });
}

afterEach(() => {
  for (const restore of restores.splice(0).reverse()) restore();
});

describe('colour', () => {
  it('paints done green, failed red, running yellow, and nothing when disabled', () => {
    expect(paintState(true, 'completed')).toBe(`${esc}[32mcompleted${esc}[0m`);
    expect(paintState(true, 'dead', 'dead      ')).toBe(`${esc}[31mdead      ${esc}[0m`);
    expect(paintState(true, 'running')).toBe(`${esc}[33mrunning${esc}[0m`);
    expect(paintState(true, 'FAIL')).toContain(`${esc}[31m`);
    expect(paintState(true, 'queued')).toBe('queued');
    expect(paintState(false, 'completed')).toBe('completed');
  });

  it('is on only for a terminal with NO_COLOR unset', () => {
    setTTY(process.stdout, true);
    setTTY(process.stderr, true);
    expect(processTerminal({})).toEqual({ color: true, progressColor: true, live: true });
    // NO_COLOR turns colour off; rewriting progress lines in place is not colour, so it stays.
    expect(processTerminal({ NO_COLOR: '1' })).toEqual({ color: false, progressColor: false, live: true });
    setTTY(process.stdout, false);
    setTTY(process.stderr, false);
    expect(processTerminal({})).toEqual(plainTerminal);
  });

  it("follows the process's streams only for the process's own writer", () => {
    setTTY(process.stdout, true);
    const saved = process.env.NO_COLOR;
    delete process.env.NO_COLOR;
    try {
      expect(terminalOf({ stdout: processIo.stdout }).color).toBe(true);
      expect(terminalOf({ stdout: () => {} })).toEqual(plainTerminal);
      process.env.NO_COLOR = '1';
      expect(terminalOf(processIo).color).toBe(false);
    } finally {
      if (saved === undefined) delete process.env.NO_COLOR;
      else process.env.NO_COLOR = saved;
    }
  });

  it('colours the state column of work list on a terminal and keeps the columns aligned', async () => {
    const home = tempHome();
    const submitted = await run([
      '--home',
      home,
      'work',
      'submit',
      'task',
      'Count',
      'the',
      'gulls',
      '--json',
    ]);
    const { id } = JSON.parse(submitted.out) as { id: string };
    await run(['--home', home, 'work', 'cancel', id]);

    const coloured = await run(['--home', home, 'work', 'list', '--state', 'cancelled'], colourTerminal);
    const row = coloured.out.split('\n')[1]!;
    expect(row).toContain(`${esc}[2mcancelled ${esc}[0m`);
    // Without the esc codes the row lines up with the header as the plain table does.
    const plain = await run(['--home', home, 'work', 'list', '--state', 'cancelled']);
    expect(plain.out).not.toContain(esc);
    expect(row.replace(new RegExp(`${esc}\\[[0-9;]*m`, 'g'), '')).toBe(plain.out.split('\n')[1]);

    const shown = await run(['--home', home, 'work', 'show', id], colourTerminal);
    expect(shown.out.split('\n')[0]).toBe(`${id}  ${esc}[2mcancelled${esc}[0m`);
  });
});

describe('progress', () => {
  it('on a terminal rewrites the block of running lines in place and keeps the final ones', () => {
    let written = '';
    const display = createProgressDisplay(
      (text) => {
        written += text;
      },
      { color: false, progressColor: false, live: true },
    );
    display.update('▸ a', { key: 'a' });
    display.update('▸ b', { key: 'b' });
    display.update('✓ a 3 ms', { key: 'a', done: true });
    display.update('  → next');
    display.update('✓ b 4 ms', { key: 'b', done: true });
    expect(written).toBe(
      [
        `\r${esc}[J▸ a\n`,
        `\r${esc}[1A${esc}[J▸ a\n▸ b\n`,
        `\r${esc}[2A${esc}[J✓ a 3 ms\n▸ b\n`,
        `\r${esc}[1A${esc}[J  → next\n▸ b\n`,
        `\r${esc}[1A${esc}[J✓ b 4 ms\n`,
      ].join(''),
    );
  });

  it('elsewhere writes one plain line per event', () => {
    let written = '';
    const display = createProgressDisplay((text) => {
      written += text;
    }, plainTerminal);
    display.update('▸ a', { key: 'a' });
    display.update('✓ a 3 ms', { key: 'a', done: true });
    expect(written).toBe('▸ a\n✓ a 3 ms\n');
  });

  it('run shows live node lines on a terminal, plain lines with no esc codes elsewhere', async () => {
    const live = workflowCli({ color: false, progressColor: true, live: true });
    await live.run('run', exampleDir, '--input', 'Create a note about tide pools');
    expect(live.err()).toContain(`\r${esc}[J`);
    expect(live.err()).toContain(`${esc}[32m✓${esc}[0m normalize_request`);

    const plain = workflowCli();
    await plain.run('run', exampleDir, '--input', 'Create a note about tide pools');
    expect(plain.err()).toMatch(/▸ start \(start\)\n/);
    expect(plain.err()).toMatch(/✓ normalize_request \d+ ms\n/);
    expect(plain.err() + plain.out()).not.toContain(esc);
  }, 60_000);

  it('eval shows the progress of its cases and colours PASS on a terminal, none off one', async () => {
    const coloured = workflowCli(colourTerminal);
    await coloured.run('eval', exampleDir);
    expect(coloured.out()).toContain(`${esc}[32mPASS${esc}[0m`);
    expect(coloured.err()).toContain(`\r${esc}[J`);

    const plain = workflowCli();
    await plain.run('eval', exampleDir);
    expect(plain.out()).toMatch(/ {2}PASS /);
    expect(plain.err()).toMatch(/✓ normalize_request \d+ ms\n/);
    expect(plain.out() + plain.err()).not.toContain(esc);
  }, 60_000);

  it('goal keeps a line per delegated task until its worker ends', () => {
    let written = '';
    const display = createProgressDisplay(
      (text) => {
        written += text;
      },
      { color: false, progressColor: false, live: true },
    );
    showAgentProgress(display, { phase: 'delegated', message: 'delegated "a" to w', workItemId: 'wi_a' });
    showAgentProgress(display, { phase: 'worker-started', message: 'w started "a"', workItemId: 'wi_a' });
    showAgentProgress(display, { phase: 'worker-completed', message: 'w finished "a"', workItemId: 'wi_a' });
    expect(written).toBe(
      `\r${esc}[J· delegated "a" to w\n\r${esc}[1A${esc}[J▸ w started "a"\n\r${esc}[1A${esc}[J✓ w finished "a"\n`,
    );
  });

  it('goal in-process: live task lines on a terminal, plain lines and no escape codes elsewhere', async () => {
    const goal = ['goal', 'Collect the open questions. Then draft an answer for each.'];
    const live = await run(['--home', tempHome(), ...goal], colourTerminal);
    expect(live.code).toBe(0);
    expect(live.err).toContain(`\r${esc}[J`);
    expect(live.err).toContain(`${esc}[32m✓${esc}[0m`);

    const plain = await run(['--home', tempHome(), ...goal]);
    expect(plain.code).toBe(0);
    expect(plain.err).toMatch(/^▸ .*\n/m);
    expect(plain.err).toMatch(/^✓ .*\n/m);
    expect(plain.err + plain.out).not.toContain(esc);
  }, 120_000);
});
