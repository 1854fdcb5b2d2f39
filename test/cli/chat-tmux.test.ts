import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ModelRequest } from '../../src/model/index.js';
import type { Runtime } from '../../src/runtime.js';
import { createScriptedModel } from '../../src/testing.js';
import { startTmux, type TmuxSession, tmuxAvailable } from '../helpers/tmux.js';
import { startRuntime } from '../runtime/helpers.js';

const root = join(import.meta.dirname, '..', '..');
const hasTmux = tmuxAvailable();
if (!hasTmux)
  console.log('skipping the agentd chat terminal test: tmux is not installed (apt-get install tmux)');

/** The prompt is back: the last non-empty line of the screen is `> ` (what the user has typed so far). */
const atPrompt = (screen: string, typed = '') =>
  screen.trimEnd().split('\n').at(-1)?.trimEnd() === `>${typed ? ` ${typed}` : ''}`;

/**
 * "Back at the prompt within a second" is held to what the screen proves (see `waitForChange`), not to the
 * wall time of the tmux commands around it: under a full test run one `tmux` call may take hundreds of
 * milliseconds. A REPL that waits for a reply that never comes still misses the 10 s wait.
 */
const promptBack = { timeoutMs: 10_000, pollMs: 25 };

/** Presses `key` and answers when it was delivered: tmux has written it to the pane once the call returns. */
async function pressedAt(tui: TmuxSession, key: string): Promise<number> {
  await tui.press(key);
  return Date.now();
}

describe.skipIf(!hasTmux)('agentd chat --url in a real terminal (tmux)', () => {
  let tui: TmuxSession | undefined;
  let runtime: Runtime | undefined;

  afterEach(async () => {
    await tui?.kill();
    await runtime?.close();
    tui = undefined;
    runtime = undefined;
  });

  it('echoes typed text, returns from /new and /stop within a second, and starts a fresh session after /new', async () => {
    // Replies echo the message; a message that asks to take its time never ends until it is stopped.
    const model = createScriptedModel({
      steps: Array.from({ length: 20 }, () => (request: ModelRequest) => {
        const last = request.messages.filter((message) => message.role === 'user').at(-1)?.content ?? '';
        return last.includes('take your time') ? { text: 'Thinking', hang: true } : { text: `Echo: ${last}` };
      }),
    });
    const started = await startRuntime({ model });
    runtime = started.runtime;
    const sessionKey = 'agent:main:tmux';
    tui = await startTmux(
      [
        'env',
        `PATH=${process.env.PATH ?? '/usr/bin:/bin'}`,
        'NO_COLOR=1',
        'AGENTD_LOG_LEVEL=silent',
        process.execPath,
        '--import',
        'tsx',
        join(root, 'src', 'cli', 'bin.ts'),
        'chat',
        '--url',
        started.url,
        '--token',
        started.runtime.state.token,
        '--session',
        'tmux',
      ],
      { width: 120, height: 30 },
    );
    await tui.waitFor(
      (screen) => screen.includes('agentd chat — session agent:main:tmux') && atPrompt(screen),
      {
        timeoutMs: 30_000,
        what: 'the chat prompt',
      },
    );

    // What is typed is on the screen before Enter is pressed.
    await tui.type('My cat is called Pixel.');
    await tui.waitFor((screen) => atPrompt(screen, 'My cat is called Pixel.'), { what: 'the typed text' });
    await tui.press('Enter');
    await tui.waitFor((screen) => screen.includes('Echo: My cat is called Pixel.') && atPrompt(screen), {
      what: 'the reply',
    });

    await tui.type('/new');
    await tui.waitFor((screen) => atPrompt(screen, '/new'), { what: 'the typed /new' });
    const newPressed = await pressedAt(tui, 'Enter');
    const afterNew = await tui.waitForChange(
      (screen) => /New session \S+ under agent:main:tmux\./.test(screen) && atPrompt(screen),
      newPressed,
      { ...promptBack, what: '/new to return to the prompt' },
    );
    expect(afterNew.notBeforeMs).toBeLessThan(1_000);

    await tui.type('What is my cat called?');
    await tui.press('Enter');
    await tui.waitFor((screen) => screen.includes('Echo: What is my cat called?') && atPrompt(screen), {
      what: 'the reply in the new session',
    });
    const history = await started.runtime.memory.history(sessionKey, { limit: 10 });
    expect(history.map((entry) => entry.content)).toEqual([
      'What is my cat called?',
      'Echo: What is my cat called?',
    ]);

    await tui.type('Please take your time.');
    await tui.press('Enter');
    await expect
      .poll(() => started.runtime.health(), { timeout: 10_000 })
      .toMatchObject({ runs: { active: 1 } });
    await tui.type('/stop');
    await tui.waitFor((screen) => screen.includes('/stop'), { what: 'the typed /stop' });
    const stopPressed = await pressedAt(tui, 'Enter');
    const afterStop = await tui.waitForChange(
      (screen) => screen.includes('[aborted]') && atPrompt(screen),
      stopPressed,
      { ...promptBack, what: '/stop to end the reply and return to the prompt' },
    );
    expect(afterStop.notBeforeMs).toBeLessThan(1_000);
    expect(started.runtime.health()).toMatchObject({ runs: { active: 0 } });

    await tui.type('/exit');
    await tui.press('Enter');
  }, 120_000);
});
