import type { Logger } from '../util/index.js';
import { ErrorCodes, UserInputError } from '../util/index.js';
import { createAcpModel, parseAcpModelName } from './acp.js';
import { createAnthropicModel } from './anthropic.js';
import { type CommandModelOptions, commandPresets, createCommandModel } from './command.js';
import { createLocalModel } from './local.js';
import { createOpenAIModel } from './openai.js';
import type { LanguageModel } from './spec.js';

/**
 * One provider's settings from config: the key and the endpoint it belongs to travel together, so a key is
 * never sent to an endpoint chosen by something else (the environment, another entry).
 */
export interface ProviderSettings {
  apiKey?: string | undefined;
  baseUrl?: string | undefined;
  /** The model used when none is named and this provider is picked. */
  defaultModel?: string | undefined;
}

export type ProviderCredentials = Record<string, ProviderSettings>;

/** Where `resolveModel` finds keys and endpoints for a `provider/model` name. */
export interface ResolveModelOptions {
  /** Default `process.env`: keys for providers without an entry in `credentials`, and default base URLs. */
  env?: Record<string, string | undefined>;
  /**
   * Settings from `provider_credentials` (config), by provider. An entry's key wins over the environment's
   * and goes to the entry's `baseUrl`; only an entry without one falls back to `*_BASE_URL`, then the
   * provider's public endpoint.
   */
  credentials?: ProviderCredentials;
  fetch?: typeof globalThis.fetch;
  /** Named command backends from the config, usable as `command/<name>` besides the presets. */
  commands?: Record<string, CommandModelOptions>;
  logger?: Logger;
}

export const ollamaDefaultBaseUrl = 'http://127.0.0.1:11434/v1';
export const defaultLocalModelName = 'local/agentd-local';

export const knownProviders = ['openai', 'anthropic', 'ollama', 'command', 'acp', 'local'] as const;

/**
 * `provider/model` → a LanguageModel. Only the first `/` separates: `openai/meta-llama/llama-3-8b` is the
 * model `meta-llama/llama-3-8b` on an OpenAI-compatible server. Throws UserInputError(INVALID_CONFIG) with
 * the variable to set when a provider is unknown or has no credentials. Messages never contain secrets.
 */
export function resolveModel(name: string, options: ResolveModelOptions = {}): LanguageModel {
  const env = options.env ?? process.env;
  const slash = name.indexOf('/');
  if (slash <= 0 || slash === name.length - 1) {
    throw invalid(
      `The model name '${name}' is not of the form provider/model (for example openai/gpt-4o-mini or local/agentd-local).`,
    );
  }
  const provider = name.slice(0, slash).toLowerCase();
  const model = name.slice(slash + 1);
  const fetchOption = options.fetch ? { fetch: options.fetch } : {};
  const configured = options.credentials?.[provider];
  // A configured key is used only with the configured endpoint, or the provider's usual one (its
  // `*_BASE_URL` variable, else the public API) when the entry names none; never another entry's.
  const apiKeyFrom = (envName: string) => (configured ? nonEmpty(configured.apiKey) : nonEmpty(env[envName]));
  const baseUrlFrom = (envName: string) => nonEmpty(configured?.baseUrl) ?? nonEmpty(env[envName]);
  const resolved = (() => {
    switch (provider) {
      case 'openai': {
        const apiKey = apiKeyFrom('OPENAI_API_KEY');
        const baseURL = baseUrlFrom('OPENAI_BASE_URL');
        if (!apiKey && !baseURL) {
          throw invalid(
            `The model '${name}' needs an OpenAI API key: set OPENAI_API_KEY (or provider_credentials for openai), or set OPENAI_BASE_URL to an OpenAI-compatible server.`,
          );
        }
        return createOpenAIModel({ model, apiKey, baseURL, ...fetchOption });
      }
      case 'ollama':
        return createOpenAIModel({
          model,
          provider: 'ollama',
          apiKey: configured ? nonEmpty(configured.apiKey) : undefined,
          baseURL: ollamaBaseUrl(baseUrlFrom('OLLAMA_BASE_URL')),
          ...fetchOption,
        });
      case 'anthropic': {
        const apiKey = apiKeyFrom('ANTHROPIC_API_KEY');
        if (!apiKey) {
          throw invalid(
            `The model '${name}' needs an Anthropic API key: set ANTHROPIC_API_KEY (or provider_credentials for anthropic).`,
          );
        }
        return createAnthropicModel({
          model,
          apiKey,
          baseURL: baseUrlFrom('ANTHROPIC_BASE_URL'),
          ...fetchOption,
        });
      }
      case 'command': {
        const configured =
          options.commands?.[model] ?? (commandPresets as Record<string, CommandModelOptions>)[model];
        if (!configured) {
          const known = [...Object.keys(commandPresets), ...Object.keys(options.commands ?? {})].join(', ');
          throw invalid(
            `There is no command backend '${model}'. Known: ${known}. Define more under the config's model commands.`,
          );
        }
        return createCommandModel({ ...configured, args: [...(configured.args ?? [])] });
      }
      case 'acp': {
        const { command, args } = parseAcpModelName(model);
        if (!command) throw invalid(`The model '${name}' names no command: use acp/<command> [args].`);
        return createAcpModel({ command, args, env });
      }
      case 'local':
        return createLocalModel({ modelId: model });
      default:
        throw invalid(
          `Unknown model provider '${provider}' in '${name}'. Known providers: ${knownProviders.join(', ')}.`,
        );
    }
  })();
  options.logger?.debug({ provider: resolved.provider, model: resolved.modelId }, 'model resolved');
  return resolved;
}

/**
 * The model to use when none is named: AGENTD_MODEL; else the first provider with credentials
 * (OpenAI by config entry, key or OPENAI_BASE_URL, then Anthropic, then an Ollama entry that names a
 * model), with the entry's `defaultModel` when it has one; else the offline local model.
 */
export function defaultModelName(
  env: Record<string, string | undefined> = process.env,
  credentials: ProviderCredentials = {},
): string {
  const configured = nonEmpty(env.AGENTD_MODEL);
  if (configured) return configured;
  const { openai, anthropic, ollama } = credentials;
  // A server of its own (base URL) runs a model whose name is unknown, so `default` unless the entry names one.
  if (openai) return `openai/${openai.defaultModel ?? (openai.baseUrl ? 'default' : 'gpt-4o-mini')}`;
  if (nonEmpty(env.OPENAI_API_KEY)) return 'openai/gpt-4o-mini';
  // A base URL without a key is an OpenAI-compatible server; its model is unknown, so `default` (set
  // AGENTD_MODEL=openai/<model> for servers that insist on a real name).
  if (nonEmpty(env.OPENAI_BASE_URL)) return 'openai/default';
  if (anthropic) return `anthropic/${anthropic.defaultModel ?? 'claude-sonnet-4-5'}`;
  if (nonEmpty(env.ANTHROPIC_API_KEY)) return 'anthropic/claude-sonnet-4-5';
  if (ollama?.defaultModel) return `ollama/${ollama.defaultModel}`;
  return defaultLocalModelName;
}

/** Accepts `http://host:11434` as well as the full `http://host:11434/v1`. */
function ollamaBaseUrl(configured: string | undefined): string {
  if (!configured) return ollamaDefaultBaseUrl;
  const trimmed = configured.replace(/\/+$/, '');
  return /^https?:\/\/[^/]+$/.test(trimmed) ? `${trimmed}/v1` : trimmed;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value?.trim() ? value.trim() : undefined;
}

function invalid(message: string): UserInputError {
  return new UserInputError({ code: ErrorCodes.invalidConfig, message });
}
