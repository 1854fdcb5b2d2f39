// The whole agentd runtime (createRuntime: store, memory, identity, engage loop, model) serving its gateway
// on a free loopback port from a temporary AGENTD_HOME, for the benchmarks that run it in a child process.
// It loads the compiled package, dist/ (`npm run build`), as `npm start` does: src/ through tsx adds tsx's
// own work to agentd's (esbuild's `__name` on every function it makes, the loader) and its compiled copies to
// the RSS. AGENTD_BENCH_FROM_SRC=1 loads src/ through tsx instead.
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Runtime } from '../src/runtime.js';

const fromSource = Boolean(process.env.AGENTD_BENCH_FROM_SRC);

/** Where the benchmark servers' agentd comes from, for the notes. */
export const runtimeSource = fromSource
  ? 'src/ through tsx (AGENTD_BENCH_FROM_SRC; its compiled copies are in the RSS)'
  : 'the compiled dist/ (npm run build), as npm start runs it';

function newestMtimeMs(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtimeMs(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/** Throws when dist/ is missing or older than src/: a benchmark must not time code that is not the tree's. */
export function assertRuntimeBuilt(): void {
  if (fromSource) return;
  const root = fileURLToPath(new URL('..', import.meta.url));
  const built = join(root, 'dist', 'runtime.js');
  if (!existsSync(built))
    throw new Error('dist/ is missing: run `npm run build` (or set AGENTD_BENCH_FROM_SRC=1)');
  if (newestMtimeMs(join(root, 'src')) > statSync(built).mtimeMs)
    throw new Error('dist/ is older than src/: run `npm run build` (or set AGENTD_BENCH_FROM_SRC=1)');
}

export async function serveRuntime(options: {
  token: string;
  /** Added to the runtime's environment (a model to use, say). */
  env?: Record<string, string>;
  databaseUrl?: string;
  /** Written to the home's agentd.yaml before the runtime reads its configuration. */
  configYaml?: string;
}): Promise<{ port: number; runtime: Runtime; stop(): Promise<void> }> {
  const from = fromSource ? '../src' : '../dist';
  const { loadConfig } = (await import(`${from}/config/index.js`)) as typeof import('../src/config/index.js');
  // As the CLI (bin/agentd.js) does first thing, where the tree has it (an older tree of an A/B may not).
  const util = (await import(`${from}/util/index.js`)) as Partial<typeof import('../src/util/index.js')>;
  util.disableAllocationSitePretenuring?.();
  const { createRuntime } = (await import(`${from}/runtime.js`)) as typeof import('../src/runtime.js');
  const home = mkdtempSync(join(tmpdir(), 'agentd-bench-runtime-'));
  if (options.configYaml !== undefined) writeFileSync(join(home, 'agentd.yaml'), options.configYaml);
  // Only these variables: no key from the benchmark's environment may reach the runtime.
  const env = { AGENTD_HOME: home, AGENTD_TOKEN: options.token, AGENTD_LOG_LEVEL: 'error', ...options.env };
  const databaseUrl = options.databaseUrl;
  const runtime = await createRuntime({
    config: loadConfig({ cwd: home, env, overrides: { port: 0, ...(databaseUrl ? { databaseUrl } : {}) } }),
    env,
  });
  const { server } = await runtime.startGateway({ port: 0 });
  // As `agentd serve` does once it listens (a tree before decision 0034 has no prepare).
  void runtime.prepare?.();
  return {
    port: server.address()!.port,
    runtime,
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
  /** 'pipe': the server's standard output is read from `child.stdout` (what V8's tracing flags print). */
  stdout?: 'inherit' | 'pipe';
}): Promise<{ child: ChildProcess; port: number }> {
  const child = fork(new URL(options.moduleUrl), [], {
    execArgv: options.execArgv ?? ['--import', 'tsx'],
    env: { ...process.env, [options.roleVariable]: options.role, ...options.env },
    stdio: ['ignore', options.stdout ?? 'inherit', 'inherit', 'ipc'],
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
