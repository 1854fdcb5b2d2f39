import { createServer } from 'node:net';
import type { Command } from 'commander';
import type { ProviderCredentials } from '../../model/index.js';
import { silentLogger } from '../../util/index.js';
import { loadConfigModule, loadModel, loadRuntime, loadStore } from '../lazy-modules.js';
import { ExitCodes, printJson, reportError } from '../output.js';
import { terminalLogDestination } from '../pretty-log.js';
import { connectFromOptions, type RemoteOptions, tokenOption, urlOption } from '../remote.js';
import type { CliCommandDeps } from './chat.js';

function fail(deps: CliCommandDeps, error: unknown, json: boolean): void {
  deps.setExitCode(reportError(deps.io, error, json));
}

/** `status` (of this state directory, or of a running gateway) and `doctor` (can agentd run here). */
export function registerStatusCommands(program: Command, deps: CliCommandDeps): Command {
  program
    .command('status')
    .description('runtime status: store, model, sessions, runs (of a running server with --url)')
    .addOption(urlOption('a running agentd gateway'))
    .addOption(tokenOption())
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
          const runtime = await (await loadRuntime()).createRuntime({
            config: await deps.config(),
            ...terminalLogDestination(),
          });
          try {
            status = (await runtime.services.health.status()) as Record<string, unknown>;
            status.sessions = (await runtime.store.sessions.list({ limit: 1000 })).length;
          } finally {
            await runtime.close();
          }
        }
        if (json) printJson(deps.io, status);
        else deps.io.stdout(statusText(status));
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
        const config = await deps.config();
        const major = Number(process.versions.node.split('.')[0]);
        checks.push({
          check: 'node',
          ok: major >= 20,
          detail: `Node ${process.versions.node} (needs 20 or newer)`,
        });
        const { createStore } = await loadStore();
        const { defaultModelName, ollamaDefaultBaseUrl, resolveModel } = await loadModel();
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
        const credentials = (await loadConfigModule()).providerSettings(config.credentials);
        const name = config.model ?? defaultModelName(process.env, credentials);
        try {
          resolveModel(name, { credentials });
          const endpoint = modelEndpoint(name, credentials, process.env, ollamaDefaultBaseUrl);
          const probe = endpoint ? await probeModelEndpoint(endpoint) : undefined;
          checks.push({
            check: 'model',
            ok: probe?.ok ?? true,
            detail: `${name}${config.credentials.length ? ` (credentials: ${config.credentials.map((credential) => credential.source).join(', ')})` : ''}${probe ? `: ${probe.detail}` : ''}`,
          });
        } catch (error) {
          checks.push({ check: 'model', ok: false, detail: (error as Error).message });
        }
        const portFree = await new Promise<boolean>((resolve) => {
          const server = createServer();
          server.once('error', () => resolve(false));
          server.listen(config.port, config.host, () => server.close(() => resolve(true)));
        });
        const running = portFree ? undefined : await runningAgentd(config.host, config.port);
        checks.push({
          check: 'port',
          ok: portFree || running !== undefined,
          detail: portFree
            ? `${config.host}:${config.port} is free`
            : running
              ? `agentd ${running} is already running on ${config.host}:${config.port}`
              : `${config.host}:${config.port} is in use by another program (set AGENTD_PORT or --port)`,
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

/** How long doctor waits for the model endpoint and for a server on the port. */
const probeTimeoutMs = 3_000;

interface ModelEndpoint {
  url: string;
  headers: Record<string, string>;
}

/**
 * The HTTP endpoint behind a model name, for the providers that have one (the offline model, CLIs and ACP
 * agents have none): the configured entry's base URL, else the provider's `*_BASE_URL`, else its public API.
 */
function modelEndpoint(
  name: string,
  credentials: ProviderCredentials,
  env: NodeJS.ProcessEnv,
  ollamaDefaultBaseUrl: string,
): ModelEndpoint | undefined {
  const provider = name.slice(0, name.indexOf('/')).toLowerCase();
  const entry = credentials[provider];
  const pick = (envName: string, fallback: string) =>
    (entry?.baseUrl || env[envName] || fallback).replace(/\/+$/, '');
  switch (provider) {
    case 'openai': {
      const apiKey = entry ? entry.apiKey : env.OPENAI_API_KEY;
      return {
        url: `${pick('OPENAI_BASE_URL', 'https://api.openai.com/v1')}/models`,
        headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
      };
    }
    case 'ollama':
      return { url: `${pick('OLLAMA_BASE_URL', ollamaDefaultBaseUrl)}/models`, headers: {} };
    case 'anthropic': {
      const apiKey = entry ? entry.apiKey : env.ANTHROPIC_API_KEY;
      return {
        url: `${pick('ANTHROPIC_BASE_URL', 'https://api.anthropic.com')}/v1/models`,
        headers: { 'anthropic-version': '2023-06-01', ...(apiKey ? { 'x-api-key': apiKey } : {}) },
      };
    }
    default:
      return undefined;
  }
}

/** Asks the endpoint for its model list: unreachable or a refused key is a failure, any other answer is not. */
async function probeModelEndpoint(endpoint: ModelEndpoint): Promise<{ ok: boolean; detail: string }> {
  const where = new URL(endpoint.url).origin;
  try {
    const response = await fetch(endpoint.url, {
      headers: endpoint.headers,
      signal: AbortSignal.timeout(probeTimeoutMs),
    });
    await response.body?.cancel();
    if (response.status === 401 || response.status === 403)
      return { ok: false, detail: `${where} refused the credentials (HTTP ${response.status})` };
    return { ok: true, detail: `${where} answers (HTTP ${response.status})` };
  } catch (error) {
    const reason = (error as Error & { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
    return { ok: false, detail: `cannot reach ${where} (${reason})` };
  }
}

/** The version of the agentd answering `GET /health` on the port, or undefined when something else is there. */
async function runningAgentd(host: string, port: number): Promise<string | undefined> {
  try {
    const response = await fetch(`http://${host.includes(':') ? `[${host}]` : host}:${port}/health`, {
      signal: AbortSignal.timeout(probeTimeoutMs),
    });
    const body = (await response.json()) as { status?: unknown; version?: unknown };
    return typeof body.status === 'string' && typeof body.version === 'string' ? body.version : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The status for a person: a line per field, an object's fields indented under its name, a list of plain
 * values on one line, and each object of a list on a line of its own (`- key value, …`). `--json` is for
 * programs.
 */
function statusText(status: Record<string, unknown>): string {
  const lines: string[] = [];
  const plain = (value: unknown): string =>
    value === null || typeof value !== 'object' ? String(value) : JSON.stringify(value);
  const walk = (record: Record<string, unknown>, indent: string) => {
    // Fields without a value are left out, as JSON leaves them out.
    const fields = Object.entries(record).filter(([, value]) => value !== undefined);
    const width = Math.max(0, ...fields.map(([key]) => key.length)) + 2;
    for (const [key, value] of fields) {
      if (Array.isArray(value)) {
        if (value.every((item) => item === null || typeof item !== 'object')) {
          lines.push(
            `${indent}${key.padEnd(width)}${value.length === 0 ? 'none' : value.map(plain).join(', ')}`,
          );
          continue;
        }
        lines.push(`${indent}${key}`);
        for (const item of value)
          lines.push(
            `${indent}  - ${
              item !== null && typeof item === 'object' && !Array.isArray(item)
                ? Object.entries(item)
                    .map(([field, fieldValue]) => `${field} ${plain(fieldValue)}`)
                    .join(', ')
                : plain(item)
            }`,
          );
      } else if (value !== null && typeof value === 'object' && Object.keys(value).length > 0) {
        lines.push(`${indent}${key}`);
        walk(value as Record<string, unknown>, `${indent}  `);
      } else lines.push(`${indent}${key.padEnd(width)}${plain(value)}`);
    }
  };
  walk(status, '');
  return `${lines.join('\n')}\n`;
}
