import { execFile, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Whether tmux is installed (`.ci/run` installs it with apt when it is missing). */
export function tmuxAvailable(): boolean {
  try {
    execFileSync('tmux', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export interface TmuxSession {
  readonly name: string;
  /** Types text (literally) into the pane. */
  type(text: string): Promise<void>;
  /** Presses keys by tmux name: `Enter`, `Escape`, `C-c`. */
  press(...keys: string[]): Promise<void>;
  /** The visible pane as plain text. */
  capture(): Promise<string>;
  /**
   * Polls the pane until `match` holds, and returns that screen; after `timeoutMs` it throws with the last
   * screen, so a failing test shows what the program showed.
   */
  waitFor(
    match: (screen: string) => boolean,
    options?: { timeoutMs?: number; what?: string },
  ): Promise<string>;
  /**
   * Waits as `waitFor` does (polling every `pollMs`), for a change the program makes after `sinceMs`, and
   * answers `notBeforeMs`: how long after `sinceMs` the last capture that did not match yet began. The
   * program was still without the change at that moment, so it took at least that long; a slow capture on
   * a loaded machine delays when the match is seen, never this bound, so a test may hold it to a time.
   */
  waitForChange(
    match: (screen: string) => boolean,
    sinceMs: number,
    options?: { timeoutMs?: number; what?: string; pollMs?: number },
  ): Promise<{ screen: string; notBeforeMs: number }>;
  kill(): Promise<void>;
}

/**
 * Runs a command in a detached tmux session of its own (its own server socket, so tests never touch a
 * user's tmux) with a fixed window size, to drive a full-screen terminal program like a user would.
 */
export async function startTmux(
  command: string[],
  options: { env?: Record<string, string>; width?: number; height?: number; pollMs?: number } = {},
): Promise<TmuxSession> {
  const name = `agentd-test-${randomUUID().slice(0, 8)}`;
  const socket = ['-L', name];
  const pollMs = options.pollMs ?? 200;
  const envArgs = Object.entries(options.env ?? {}).flatMap(([key, value]) => ['-e', `${key}=${value}`]);
  // A pane whose program exits stays on screen, so a timeout shows what the program printed last (a crash)
  // instead of an empty capture of a session that is gone.
  await run('tmux', [
    ...socket,
    'start-server',
    ';',
    'set-option',
    '-g',
    'remain-on-exit',
    'on',
    ';',
    'new-session',
    '-d',
    '-s',
    name,
    '-x',
    String(options.width ?? 140),
    '-y',
    String(options.height ?? 40),
    ...envArgs,
    ...command,
  ]);
  const tmux = async (...args: string[]) => (await run('tmux', [...socket, ...args])).stdout;
  // tmux leaves its socket file behind when the server is killed; remember it to remove it.
  const socketPath = (await tmux('display-message', '-p', '-t', name, '#{socket_path}')).trim();
  const capture = async () => await tmux('capture-pane', '-p', '-t', name);
  /** Captures until `match` holds; says when the last capture that did not match began. */
  const poll = async (
    match: (screen: string) => boolean,
    waitOptions: { timeoutMs?: number; what?: string; pollMs?: number },
  ): Promise<{ screen: string; lastMissStartedAt: number | undefined }> => {
    const deadline = Date.now() + (waitOptions.timeoutMs ?? 60_000);
    let screen = '';
    let lastMissStartedAt: number | undefined;
    for (;;) {
      const startedAt = Date.now();
      try {
        screen = await capture();
      } catch {
        // The program may have exited and taken the session with it; the deadline reports it.
      }
      if (match(screen)) return { screen, lastMissStartedAt };
      lastMissStartedAt = startedAt;
      if (Date.now() > deadline) {
        throw new Error(
          `tmux: timed out waiting for ${waitOptions.what ?? 'the screen'}; last screen:\n${screen}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, waitOptions.pollMs ?? pollMs));
    }
  };
  return {
    name,
    async type(text) {
      await tmux('send-keys', '-t', name, '-l', text);
    },
    async press(...keys) {
      await tmux('send-keys', '-t', name, ...keys);
    },
    capture,
    async waitFor(match, waitOptions = {}) {
      return (await poll(match, waitOptions)).screen;
    },
    async waitForChange(match, sinceMs, waitOptions = {}) {
      const { screen, lastMissStartedAt } = await poll(match, waitOptions);
      return { screen, notBeforeMs: Math.max(0, (lastMissStartedAt ?? sinceMs) - sinceMs) };
    },
    async kill() {
      await run('tmux', [...socket, 'kill-server']).catch(() => undefined);
      if (socketPath) rmSync(socketPath, { force: true });
    },
  };
}
