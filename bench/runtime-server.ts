// The whole agentd runtime (createRuntime: store, memory, identity, engage loop, model) serving its gateway
// on a free loopback port from a temporary AGENTD_HOME, for the benchmarks that run it in a child process.
// AGENTD_BENCH_FROM_DIST=1 loads the compiled package (its RSS is what a deployment has; tsx's compiled
// copies add to it) instead of src/.
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export async function serveRuntime(options: {
  token: string;
  /** Added to the runtime's environment (a model to use, say). */
  env?: Record<string, string>;
  databaseUrl?: string;
}): Promise<{ port: number; stop(): Promise<void> }> {
  const from = process.env.AGENTD_BENCH_FROM_DIST ? '../dist' : '../src';
  const { loadConfig } = (await import(`${from}/config/index.js`)) as typeof import('../src/config/index.js');
  const { createRuntime } = (await import(`${from}/runtime.js`)) as typeof import('../src/runtime.js');
  const home = mkdtempSync(join(tmpdir(), 'agentd-bench-runtime-'));
  // Only these variables: no key from the benchmark's environment may reach the runtime.
  const env = { AGENTD_HOME: home, AGENTD_TOKEN: options.token, AGENTD_LOG_LEVEL: 'error', ...options.env };
  const databaseUrl = options.databaseUrl;
  const runtime = await createRuntime({
    config: loadConfig({ cwd: home, env, overrides: { port: 0, ...(databaseUrl ? { databaseUrl } : {}) } }),
    env,
  });
  const { server } = await runtime.startGateway({ port: 0 });
  return {
    port: server.address()!.port,
    stop: async () => {
      await runtime.close();
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/**
 * Forks a benchmark module as one of its server roles (`roleVariable=role` in its environment) and resolves
 * with the port its `{ type: 'ready', port }` message names; rejects if it exits first.
 */
export async function forkRoleServer(options: {
  moduleUrl: string;
  roleVariable: string;
  role: string;
  env?: Record<string, string>;
  execArgv?: string[];
}): Promise<{ child: ChildProcess; port: number }> {
  const child = fork(new URL(options.moduleUrl), [], {
    execArgv: options.execArgv ?? ['--import', 'tsx'],
    env: { ...process.env, [options.roleVariable]: options.role, ...options.env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const ready = await new Promise<{ port: number }>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`${options.role} server exited with ${code}`)));
    child.on('message', (message: { type: string; port: number }) => {
      if (message.type === 'ready') resolve(message);
    });
  });
  child.removeAllListeners('exit');
  return { child, port: ready.port };
}
