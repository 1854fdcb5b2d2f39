import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A real `agentd serve` (the built CLI) in a child process, for the suites that kill it with SIGKILL: a crash
 * as an operator's machine has one, then a restart on the same home and database.
 */

const repoRoot = join(import.meta.dirname, '..', '..');

export interface Served {
  child: ChildProcess;
  url: string;
  token: string;
}

export function serve(home: string, databaseUrl: string | undefined): Promise<Served> {
  if (!existsSync(join(repoRoot, 'dist', 'cli', 'bin.js')))
    throw new Error('the crash suite runs the built CLI: run `npm run build` first');
  // The built CLI, as operators run it (.ci/run builds before the tests); from source it starts too slowly.
  const child = spawn(process.execPath, ['bin/agentd.js', 'serve', '--port', '0', '--json'], {
    cwd: repoRoot,
    env: {
      ...process.env,
      AGENTD_HOME: home,
      AGENTD_LOG_LEVEL: 'error',
      AGENTD_MODEL: '',
      DATABASE_URL: databaseUrl ?? '',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let output = '';
    let errors = '';
    child.stderr!.on('data', (chunk) => {
      errors += String(chunk);
    });
    child.stdout!.on('data', (chunk) => {
      output += String(chunk);
      try {
        const started = JSON.parse(output) as { websocket: string; token: string };
        resolve({ child, url: started.websocket, token: started.token });
      } catch {
        // The JSON start-up line is not complete yet.
      }
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`agentd serve exited (${code ?? signal}): ${errors}`)),
    );
  });
}

export async function kill(served: Served): Promise<void> {
  if (served.child.exitCode !== null || served.child.signalCode !== null) return;
  const exited = new Promise((resolve) => served.child.once('exit', resolve));
  served.child.kill('SIGKILL');
  await exited;
}
