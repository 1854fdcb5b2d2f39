import { createServer } from 'node:net';
import type { Command } from 'commander';
import { providerSettings } from '../../config/index.js';
import { defaultModelName, resolveModel } from '../../model/index.js';
import { createRuntime } from '../../runtime.js';
import { createStore } from '../../store/index.js';
import { silentLogger } from '../../util/index.js';
import { ExitCodes, printJson, reportError } from '../output.js';
import { connectFromOptions, type RemoteOptions } from '../remote.js';
import type { CliCommandDeps } from './chat.js';

function fail(deps: CliCommandDeps, error: unknown, json: boolean): void {
  deps.setExitCode(reportError(deps.io, error, json));
}

/** `status` (of this state directory, or of a running gateway) and `doctor` (can agentd run here). */
export function registerStatusCommands(program: Command, deps: CliCommandDeps): Command {
  program
    .command('status')
    .description('runtime status: store, model, sessions, runs (of a running server with --url)')
    .option('--url <url>', 'a running agentd gateway')
    .option('--token <token>', 'gateway token (default $AGENTD_TOKEN)')
    .option('--json', 'print JSON')
    .action(async (options: RemoteOptions & { json?: boolean }) => {
      const json = options.json ?? false;
      try {
        let status: Record<string, unknown>;
        if (options.url) {
          const client = await connectFromOptions(options);
          try {
            status = await client.call<Record<string, unknown>>('status');
          } finally {
            await client.close();
          }
        } else {
          const runtime = await createRuntime({ config: deps.config() });
          try {
            status = (await runtime.services.health.status()) as Record<string, unknown>;
            status.sessions = (await runtime.store.sessions.list({ limit: 1000 })).length;
          } finally {
            await runtime.close();
          }
        }
        if (json) printJson(deps.io, status);
        else
          for (const [key, value] of Object.entries(status))
            deps.io.stdout(
              `${key.padEnd(10)} ${typeof value === 'object' ? JSON.stringify(value) : String(value)}\n`,
            );
      } catch (error) {
        fail(deps, error, json);
      }
    });

  program
    .command('doctor')
    .description('check Node, the store, model credentials and the port')
    .option('--json', 'print JSON')
    .action(async (options: { json?: boolean }) => {
      const json = options.json ?? false;
      const checks: Array<{ check: string; ok: boolean; detail: string }> = [];
      try {
        const config = deps.config();
        const major = Number(process.versions.node.split('.')[0]);
        checks.push({
          check: 'node',
          ok: major >= 20,
          detail: `Node ${process.versions.node} (needs 20 or newer)`,
        });
        try {
          const store = await createStore({
            stateDir: config.home,
            ...(config.databaseUrl ? { databaseUrl: config.databaseUrl } : {}),
            logger: silentLogger,
          });
          checks.push({
            check: 'store',
            ok: store.mode !== 'memory',
            detail:
              store.mode === 'memory'
                ? `RAM-only: ${store.degradedReason}`
                : `${store.mode} at ${store.db.location}`,
          });
          await store.close();
        } catch (error) {
          checks.push({ check: 'store', ok: false, detail: (error as Error).message });
        }
        const credentials = providerSettings(config.credentials);
        const name = config.model ?? defaultModelName(process.env, credentials);
        try {
          resolveModel(name, { credentials });
          checks.push({
            check: 'model',
            ok: true,
            detail: `${name}${config.credentials.length ? ` (credentials: ${config.credentials.map((credential) => credential.source).join(', ')})` : ''}`,
          });
        } catch (error) {
          checks.push({ check: 'model', ok: false, detail: (error as Error).message });
        }
        const portFree = await new Promise<boolean>((resolve) => {
          const server = createServer();
          server.once('error', () => resolve(false));
          server.listen(config.port, config.host, () => server.close(() => resolve(true)));
        });
        checks.push({
          check: 'port',
          ok: portFree,
          detail: `${config.host}:${config.port} ${portFree ? 'is free' : 'is in use (is agentd already running?)'}`,
        });
        for (const warning of config.warnings) checks.push({ check: 'config', ok: false, detail: warning });
      } catch (error) {
        fail(deps, error, json);
        return;
      }
      if (json) printJson(deps.io, { ok: checks.every((check) => check.ok), checks });
      else
        for (const check of checks)
          deps.io.stdout(`${check.ok ? 'ok  ' : 'FAIL'} ${check.check.padEnd(6)} ${check.detail}\n`);
      if (!checks.every((check) => check.ok)) deps.setExitCode(ExitCodes.failure);
    });
  return program;
}
