import { existsSync, readFileSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { ErrorCodes, formatZodIssues, UserInputError, yamlParser } from '../util/index.js';
import {
  type AgentDefinition,
  type ConfigFile,
  configFileSchema,
  type FeatureFlags,
  type ProviderCredentialConfig,
} from './schema.js';

const maxConfigBytes = 1024 * 1024;
/** Aliases resolved in one YAML document: enough for shared blocks, far too few for a "billion laughs". */
const maxYamlAliases = 100;

/** A resolved credential. `apiKey` is a secret: never log it, never put it in an error or an event. */
export interface ResolvedCredential {
  id: string;
  provider: string;
  apiKey: string;
  baseUrl?: string;
  defaultModel?: string;
  /** Where it came from, safe to print (`env:OPENAI_API_KEY`, `file:/path`). */
  source: string;
}

/**
 * The effective configuration `loadConfig` returns: `agentd.yaml` and the environment merged, paths resolved.
 */
export interface AgentdConfig {
  /** The file that was read, if any. */
  configPath: string | undefined;
  home: string;
  host: string;
  port: number;
  /** The model name as `provider/model`; undefined means "pick the default" (the model layer decides). */
  model: string | undefined;
  databaseUrl: string | undefined;
  token: string | undefined;
  logLevel: string;
  features: FeatureFlags;
  agents: AgentDefinition[];
  credentials: ResolvedCredential[];
  /** Raw subsystem sections, parsed by each subsystem's schema in the composition root. */
  sections: Pick<
    ConfigFile,
    | 'chat'
    | 'memory'
    | 'engage'
    | 'gateway'
    | 'workers'
    | 'work'
    | 'heartbeat'
    | 'tools'
    | 'policy'
    | 'mcp'
    | 'sandbox'
    | 'workflows'
    | 'skills'
    | 'audit'
    | 'agent_runtime'
  >;
  /** Every secret value known to the process, for redaction in logs, events and telemetry. */
  secrets: string[];
  warnings: string[];
}

/**
 * Where `loadConfig` looks: the working directory for `agentd.yaml`, the environment, a `--config` path and overrides.
 */
export interface LoadConfigOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Explicit `--config` path; a missing explicit file is an error. */
  configPath?: string;
  overrides?: Partial<Pick<AgentdConfig, 'host' | 'port' | 'home' | 'model' | 'databaseUrl'>>;
}

function configError(message: string, details?: Record<string, unknown>): UserInputError {
  return new UserInputError({ code: ErrorCodes.invalidConfig, message, details });
}

function readConfigFile(path: string): ConfigFile {
  const size = statSync(path).size;
  if (size > maxConfigBytes)
    throw configError(`${path} is ${size} bytes; config files are limited to 1 MiB.`);
  let raw: unknown;
  try {
    raw = yamlParser().parse(readFileSync(path, 'utf8'), { maxAliasCount: maxYamlAliases }) ?? {};
  } catch (error) {
    throw configError(`${path} is not valid YAML: ${(error as Error).message}`);
  }
  const parsed = configFileSchema.safeParse(raw);
  if (!parsed.success) throw configError(`${path}: ${formatZodIssues(parsed.error.issues)}`);
  return parsed.data;
}

/** Environment variables that hold provider API keys, by provider. */
const envKeyByProvider: Record<string, string> = {
  openai: 'OPENAI_API_KEY',
  anthropic: 'ANTHROPIC_API_KEY',
};

function readSecretFile(path: string, key: string | undefined, warnings: string[]): string {
  if (!existsSync(path)) throw configError(`credential file ${path} does not exist.`);
  const mode = statSync(path).mode & 0o777;
  if (mode & 0o077) {
    warnings.push(
      `credential file ${path} is readable by group or others (mode ${mode.toString(8)}); chmod 600 it.`,
    );
  }
  const text = readFileSync(path, 'utf8');
  if (!key) return text.trim();
  let parsed: unknown;
  try {
    parsed = yamlParser().parse(text, { maxAliasCount: maxYamlAliases });
  } catch {
    throw configError(`credential file ${path} is not JSON or YAML, but file_key "${key}" was given.`);
  }
  const value = (parsed as Record<string, unknown> | null)?.[key];
  if (typeof value !== 'string' || value.length === 0) {
    throw configError(`credential file ${path} has no string value under "${key}".`);
  }
  return value.trim();
}

function resolveCredential(
  entry: ProviderCredentialConfig,
  env: NodeJS.ProcessEnv,
  baseDir: string,
  warnings: string[],
) {
  let apiKey: string | undefined;
  let source: string;
  if (entry.auth.source === 'env') {
    const name = entry.auth.env_var ?? envKeyByProvider[entry.provider];
    if (!name)
      throw configError(
        `credential "${entry.id}": auth.env_var is required for provider "${entry.provider}".`,
      );
    apiKey = env[name];
    source = `env:${name}`;
    if (!apiKey) {
      warnings.push(
        `credential "${entry.id}": environment variable ${name} is not set; the credential is skipped.`,
      );
      return undefined;
    }
  } else {
    if (!entry.auth.file_path)
      throw configError(`credential "${entry.id}": auth.file_path is required with source: file.`);
    const path = isAbsolute(entry.auth.file_path)
      ? entry.auth.file_path
      : resolve(baseDir, entry.auth.file_path);
    apiKey = readSecretFile(path, entry.auth.file_key, warnings);
    source = `file:${path}`;
  }
  return {
    id: entry.id,
    provider: entry.provider,
    apiKey,
    baseUrl: entry.config.base_url,
    defaultModel: entry.config.default_model,
    source,
  } satisfies ResolvedCredential;
}

/**
 * The settings each provider's client gets, by provider: key, base URL and default model of the first
 * credential entry for that provider (config entries come before plain environment keys).
 */
export function providerSettings(
  credentials: ReadonlyArray<ResolvedCredential>,
): Record<string, { apiKey: string; baseUrl?: string; defaultModel?: string }> {
  const byProvider: Record<string, { apiKey: string; baseUrl?: string; defaultModel?: string }> = {};
  for (const credential of credentials) {
    if (byProvider[credential.provider]) continue;
    byProvider[credential.provider] = {
      apiKey: credential.apiKey,
      ...(credential.baseUrl ? { baseUrl: credential.baseUrl } : {}),
      ...(credential.defaultModel ? { defaultModel: credential.defaultModel } : {}),
    };
  }
  return byProvider;
}

function parsePort(value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw configError(`AGENTD_PORT must be 0–65535, got "${value}".`);
  return port;
}

/**
 * Builds the effective configuration: defaults < agentd.yaml < environment < explicit overrides (CLI flags).
 * The config file is `--config`, else `./agentd.yaml`, else `$AGENTD_HOME/agentd.yaml`.
 */
export function loadConfig(options: LoadConfigOptions = {}): AgentdConfig {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const warnings: string[] = [];

  let configPath: string | undefined;
  if (options.configPath) {
    configPath = resolve(cwd, options.configPath);
    if (!existsSync(configPath)) throw configError(`config file ${configPath} does not exist.`);
  } else {
    const candidates = [join(cwd, 'agentd.yaml')];
    if (env.AGENTD_HOME) candidates.push(join(resolve(cwd, env.AGENTD_HOME), 'agentd.yaml'));
    configPath = candidates.find((candidate) => existsSync(candidate));
  }
  const file: ConfigFile = configPath ? readConfigFile(configPath) : {};
  const baseDir = configPath ? resolve(configPath, '..') : cwd;

  const home = resolve(cwd, options.overrides?.home ?? env.AGENTD_HOME ?? file.home ?? '.agentd');
  const credentials: ResolvedCredential[] = [];
  for (const entry of file.provider_credentials ?? []) {
    const credential = resolveCredential(entry, env, baseDir, warnings);
    if (credential) credentials.push(credential);
  }
  // Plain environment keys count as credentials too, unless a config entry already covers that provider.
  for (const [provider, name] of Object.entries(envKeyByProvider)) {
    const value = env[name];
    if (value && !credentials.some((credential) => credential.provider === provider)) {
      credentials.push({ id: provider, provider, apiKey: value, source: `env:${name}` });
    }
  }

  const token = env.AGENTD_TOKEN || undefined;
  const databaseUrl = options.overrides?.databaseUrl ?? env.DATABASE_URL ?? file.database_url;
  const secrets = credentials.map((credential) => credential.apiKey);
  if (token) secrets.push(token);
  const databasePassword = databaseUrl ? passwordOf(databaseUrl) : undefined;
  if (databasePassword) secrets.push(databasePassword);

  return {
    configPath,
    home,
    host: options.overrides?.host ?? env.AGENTD_HOST ?? file.host ?? '127.0.0.1',
    port: options.overrides?.port ?? parsePort(env.AGENTD_PORT) ?? file.port ?? 7777,
    model: options.overrides?.model ?? (env.AGENTD_MODEL || undefined) ?? file.model,
    databaseUrl,
    token,
    logLevel: env.AGENTD_LOG_LEVEL ?? file.log_level ?? 'info',
    features: file.features ?? { agent_runtime_v1: true, memory_v1: true, workers_v1: true },
    agents: file.agents ?? [],
    credentials,
    sections: {
      chat: file.chat,
      memory: file.memory,
      engage: file.engage,
      gateway: file.gateway,
      workers: file.workers,
      work: file.work,
      heartbeat: file.heartbeat,
      tools: file.tools,
      policy: file.policy,
      mcp: file.mcp,
      sandbox: file.sandbox,
      workflows: file.workflows,
      skills: file.skills,
      audit: file.audit,
      agent_runtime: file.agent_runtime,
    },
    secrets: secrets.filter((secret) => secret.length >= 4),
    warnings,
  };
}

function passwordOf(url: string): string | undefined {
  try {
    const parsed = new URL(url);
    return parsed.password ? decodeURIComponent(parsed.password) : undefined;
  } catch {
    return undefined;
  }
}
