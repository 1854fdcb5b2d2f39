// The whole agentd runtime (createRuntime: store, memory, identity, engage loop, model) serving its gateway
// on a free loopback port from a temporary AGENTD_HOME, for the benchmarks that run it in a child process.
// AGENTD_BENCH_FROM_DIST=1 loads the compiled package (its RSS is what a deployment has; tsx's compiled
// copies add to it) instead of src/.
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
