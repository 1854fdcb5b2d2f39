import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import type { CliIo } from '../../src/cli/output.js';
import { tempHome } from '../runtime/helpers.js';

function capture(): CliIo & { out: () => string; err: () => string } {
  let out = '';
  let err = '';
  return {
    stdout: (text) => {
      out += text;
    },
    stderr: (text) => {
      err += text;
    },
    out: () => out,
    err: () => err,
  };
}

async function run(args: string[]) {
  const io = capture();
  const code = await main(['node', 'agentd', ...args], io);
  return { code, out: io.out(), err: io.err() };
}

describe('agentd CLI', () => {
  it('send gets a reply from the offline model and remembers the session', async () => {
    const home = tempHome('agentd-cli-');
    const first = await run([
      '--home',
      home,
      'send',
      'Remember: the launch code word is tangerine.',
      '--json',
    ]);
    expect(first.code).toBe(0);
    const reply = JSON.parse(first.out) as { status: string; text: string; sessionKey: string };
    expect(reply.status).toBe('completed');
    expect(reply.text).toContain('[local model]');
    expect(reply.sessionKey).toBe('agent:main:main');

    const second = await run(['--home', home, 'send', 'What is the launch code word?']);
    expect(second.code).toBe(0);
    expect(second.out).toContain('tangerine');

    // Long-term recall crosses sessions of one agent, never agents.
    const sameAgent = await run([
      '--home',
      home,
      'send',
      'What is the launch code word?',
      '--session',
      'elsewhere',
      '--json',
    ]);
    expect(JSON.parse(sameAgent.out).text).toContain('tangerine');
    const otherAgent = await run([
      '--home',
      home,
      'send',
      'What is the launch code word?',
      '--agent',
      'other',
      '--json',
    ]);
    expect(JSON.parse(otherAgent.out).sessionKey).toBe('agent:other:main');
    expect(JSON.parse(otherAgent.out).text).not.toContain('tangerine');
  });

  it('status and doctor report as JSON', async () => {
    const home = tempHome('agentd-cli-');
    const status = await run(['--home', home, 'status', '--json']);
    expect(status.code).toBe(0);
    const parsed = JSON.parse(status.out) as {
      store: { mode: string; walBatching: boolean };
      model: { name: string };
    };
    expect(parsed.store.mode).toBe('sqlite');
    // This checkout's install builds SQLite with one WAL write a commit (scripts/build-sqlite.mjs).
    expect(parsed.store.walBatching).toBe(true);
    expect(parsed.model.name).toBe('local/agentd-local');

    const doctor = await run(['--home', home, 'doctor', '--json']);
    const report = JSON.parse(doctor.out) as { checks: Array<{ check: string; ok: boolean }> };
    expect(report.checks.map((check) => check.check)).toEqual(
      expect.arrayContaining(['node', 'store', 'model', 'port']),
    );
    expect(report.checks.find((check) => check.check === 'store')!.ok).toBe(true);
  });

  it('status in text: a line per field, nested fields indented under their name, no JSON', async () => {
    const home = tempHome('agentd-cli-');
    const status = await run(['--home', home, 'status']);
    expect(status.code).toBe(0);
    expect(status.out).toMatch(/^status +ok$/m);
    expect(status.out).toMatch(/^store\n {2}mode +sqlite\n {2}location +\S+agentd\.db$/m);
    expect(status.out).toMatch(/^ {6}- file SOUL\.md, present true, path \S+SOUL\.md$/m);
    expect(status.out).toMatch(/^ {4}warnings +none$/m);
    // No object printed as JSON, and no field without a value.
    expect(status.out).not.toMatch(/[{}]/);
    expect(status.out).not.toContain('undefined');
  });

  it('fails with clear errors and exit codes', async () => {
    const badPort = await run(['serve', '--port', 'seventy']);
    expect(badPort.code).toBe(2);
    expect(badPort.err).toMatch(/--port must be 0–65535/);

    const unknownModel = await run([
      '--home',
      tempHome('agentd-cli-'),
      '--model',
      'nosuch/model',
      'send',
      'hi',
      '--json',
    ]);
    expect(unknownModel.code).toBe(2);
    expect(JSON.parse(unknownModel.out).error.code).toBe('INVALID_CONFIG');

    const unreachable = await run(['send', 'hi', '--url', 'ws://127.0.0.1:1', '--json']);
    expect(unreachable.code).toBe(3);
    expect(JSON.parse(unreachable.out).error.code).toBe('GATEWAY_UNREACHABLE');

    const unknownCommand = await run(['frobnicate']);
    expect(unknownCommand.code).toBe(2);
  });
});

describe('agentd chat', () => {
  it('drives the REPL from stdin with one JSON line per reply', async () => {
    const { spawn } = await import('node:child_process');
    const { join } = await import('node:path');
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'src/cli/bin.ts',
        '--home',
        tempHome('agentd-cli-'),
        'chat',
        '--json',
        '--session',
        'repl',
      ],
      {
        cwd: join(import.meta.dirname, '..', '..'),
        env: { ...process.env, AGENTD_LOG_LEVEL: 'silent', AGENTD_MODEL: '' },
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += String(chunk);
    });
    child.stdin.end('My cat is called Pixel.\nWhat is my cat called?\n/exit\n');
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(0);
    const replies = out
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { status: string; text: string; sessionKey: string });
    expect(replies).toHaveLength(2);
    expect(
      replies.every((reply) => reply.status === 'completed' && reply.sessionKey === 'agent:main:repl'),
    ).toBe(true);
    expect(replies[1]!.text).toContain('Pixel');
  });
});
