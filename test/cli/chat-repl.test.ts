import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { type ChatBackend, type ChatTurnResult, runChatRepl } from '../../src/cli/chat-repl.js';
import type { CliIo } from '../../src/cli/output.js';

/** A backend whose turns end only when the test says so (or when `stop` is called), recording every call. */
function fakeBackend() {
  const calls: string[] = [];
  const open: Array<(result: ChatTurnResult) => void> = [];
  const backend: ChatBackend = {
    turn(text, on) {
      calls.push(`turn ${text}`);
      on.delta('Hel');
      on.tool('memory_search');
      on.delta('lo.');
      return new Promise((resolve) => open.push(resolve));
    },
    async stop() {
      calls.push('stop');
      const running = open.splice(0);
      for (const end of running) end({ runId: 'r', status: 'aborted', text: 'Hel' });
      return { aborted: running.length > 0 };
    },
    async reset(reason) {
      calls.push(`reset ${reason}`);
      return { sessionId: 'sess-2' };
    },
    async status() {
      calls.push('status');
      return 'model local/agentd-local · store sqlite';
    },
  };
  const finishTurn = (text = 'Hello.') => open.shift()?.({ runId: 'r', status: 'completed', text });
  return { backend, calls, finishTurn, running: () => open.length };
}

function capture(): CliIo & { out: () => string } {
  let out = '';
  return {
    stdout: (text) => {
      out += text;
    },
    stderr: (text) => {
      out += text;
    },
    out: () => out,
  };
}

const waitUntil = async (check: () => boolean) => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setImmediate(resolve));
  expect(check()).toBe(true);
};

describe('the chat REPL', () => {
  it('stops a running reply at once when /stop is typed, without waiting for the turn', async () => {
    const { backend, calls, running } = fakeBackend();
    const input = new PassThrough();
    const io = capture();
    const done = runChatRepl({ backend, sessionKey: 'agent:main:main', input, io, json: false });
    input.write('Tell me a long story.\n');
    await waitUntil(() => running() === 1);
    input.write('/stop\n');
    await waitUntil(() => io.out().includes('[aborted]'));
    expect(calls).toEqual(['turn Tell me a long story.', 'stop']);
    expect(io.out()).toContain('Hel\n[tool memory_search]\nlo.');
    input.end();
    await done;
  });

  it('handles /new, /help, /status and /exit itself and sends everything else, in order', async () => {
    const { backend, calls, finishTurn } = fakeBackend();
    const input = new PassThrough();
    const io = capture();
    const done = runChatRepl({ backend, sessionKey: 'agent:main:main', input, io, json: false });
    input.write('first\n/new\n/help\n/status\nsecond\n');
    await waitUntil(() => calls.length === 1);
    // A message typed while a reply streams waits for it.
    expect(calls).toEqual(['turn first']);
    finishTurn();
    await waitUntil(() => calls.length === 4);
    expect(calls).toEqual(['turn first', 'reset new', 'status', 'turn second']);
    finishTurn();
    input.write('/exit\nnever sent\n');
    await done;
    expect(calls).toHaveLength(4);
    expect(io.out()).toContain('New session sess-2 under agent:main:main.');
    expect(io.out()).toContain('/stop          stop the running reply');
    expect(io.out()).toContain('model local/agentd-local · store sqlite');
  });

  it('says so when /stop finds nothing running, and writes one JSON object per reply and command with --json', async () => {
    const { backend, finishTurn, running } = fakeBackend();
    const input = new PassThrough();
    const io = capture();
    const done = runChatRepl({ backend, sessionKey: 'agent:main:s', input, io, json: true });
    input.write('/stop\nhi\n');
    await waitUntil(() => running() === 1);
    finishTurn('Hello.');
    input.end('/new\n');
    await done;
    expect(
      io
        .out()
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line)),
    ).toEqual([
      { sessionKey: 'agent:main:s', command: '/stop', aborted: false },
      { sessionKey: 'agent:main:s', runId: 'r', status: 'completed', text: 'Hello.' },
      { sessionKey: 'agent:main:s', command: '/new', sessionId: 'sess-2' },
    ]);
  });
});
