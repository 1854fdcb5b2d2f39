import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * The real `openclaw` CLI (npm `openclaw` 2026.9.x on Node 24). Install it with `scripts/install-openclaw.sh`,
 * or point OPENCLAW_BIN at an existing binary.
 */
export function findOpenClaw(): { bin: string | undefined; reason: string } {
  const candidates = [
    process.env.OPENCLAW_BIN,
    join(process.env.AGENTD_OPENCLAW_DIR ?? join(homedir(), '.cache', 'agentd-openclaw'), 'bin', 'openclaw'),
  ].filter((candidate): candidate is string => Boolean(candidate));
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return { bin: candidate, reason: '' };
    } catch {
      // try the next candidate
    }
  }
  return {
    bin: undefined,
    reason: `openclaw CLI not found (looked at ${candidates.join(', ')}); run scripts/install-openclaw.sh or set OPENCLAW_BIN`,
  };
}

const run = promisify(execFile);

/** Runs the CLI with a throwaway HOME; it goes quiet when it thinks it runs inside vitest, so VITEST* is dropped. */
export async function runOpenClaw(
  bin: string,
  args: string[],
  options: { home: string; env?: Record<string, string>; timeoutMs: number },
) {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('VITEST')),
  );
  const { stdout } = await run(bin, args, {
    timeout: options.timeoutMs,
    env: { ...inherited, HOME: options.home, NO_COLOR: '1', ...options.env },
    maxBuffer: 8 * 1024 * 1024,
  });
  return stdout;
}

/** The CLI's `--json` output may follow log lines; the JSON starts at the first brace. */
export function jsonOf(stdout: string): any {
  return JSON.parse(stdout.slice(stdout.indexOf('{')));
}
