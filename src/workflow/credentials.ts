import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { yamlParser } from '../util/index.js';
import type { CredentialsManifest } from './manifest-schemas.js';

/** What may be shown about a credential: never the secret itself. */
export interface CredentialMetadata {
  id: string;
  provider: string;
  source: 'env' | 'file';
  /** The env var name or file path the secret comes from. */
  location: string;
  available: boolean;
  /** Why the secret could not be loaded, when it could not. */
  problem?: string;
  baseUrl?: string;
  defaultModel?: string;
}

export interface ResolvedCredential {
  id: string;
  provider: string;
  apiKey: string;
  baseUrl?: string;
  defaultModel?: string;
}

/**
 * Holds the secrets of `provider_credentials.yaml`. Secrets are read once at load; they are handed only to
 * the model resolver, and `redact` scrubs them from anything that leaves the engine (events, artifacts,
 * errors, persisted records). The vault serialises to metadata only, so logging it cannot leak a key.
 */
export interface CredentialVault {
  get(id: string): ResolvedCredential | undefined;
  /** The first available credential for a provider, for agents without `credential_id`. */
  forProvider(provider: string): ResolvedCredential | undefined;
  list(): CredentialMetadata[];
  /** Replaces every loaded secret in `text` with `[REDACTED]`. */
  redact(text: string): string;
  /** True when at least one secret is loaded (so callers can skip redaction work otherwise). */
  readonly hasSecrets: boolean;
  toJSON(): CredentialMetadata[];
}

const redactedMarker = '[REDACTED]';

export interface LoadCredentialsOptions {
  /** Base directory for relative `file_path`s. */
  dir: string;
  env?: Record<string, string | undefined>;
}

export function loadCredentials(
  manifest: CredentialsManifest,
  options: LoadCredentialsOptions,
): CredentialVault {
  const env = options.env ?? process.env;
  const secrets = new Map<string, ResolvedCredential>();
  const metadata: CredentialMetadata[] = [];
  for (const entry of manifest.provider_credentials) {
    const { auth } = entry;
    const base: CredentialMetadata = {
      id: entry.id,
      provider: entry.provider,
      source: auth.source,
      location: auth.source === 'env' ? auth.env_var! : auth.file_path!,
      available: false,
      ...(entry.config.base_url ? { baseUrl: entry.config.base_url } : {}),
      ...(entry.config.default_model ? { defaultModel: entry.config.default_model } : {}),
    };
    let secret: string | undefined;
    let problem: string | undefined;
    if (auth.source === 'env') {
      secret = env[auth.env_var!]?.trim() || undefined;
      if (!secret) problem = `environment variable ${auth.env_var} is not set`;
    } else {
      const path = isAbsolute(auth.file_path!) ? auth.file_path! : resolve(options.dir, auth.file_path!);
      try {
        secret = readSecretFile(path, auth.file_key);
        if (!secret)
          problem = auth.file_key
            ? `key "${auth.file_key}" not found in ${auth.file_path}`
            : `${auth.file_path} is empty`;
      } catch (error) {
        problem = `cannot read ${auth.file_path}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`;
      }
    }
    if (secret) {
      secrets.set(entry.id, {
        id: entry.id,
        provider: entry.provider,
        apiKey: secret,
        ...(entry.config.base_url ? { baseUrl: entry.config.base_url } : {}),
        ...(entry.config.default_model ? { defaultModel: entry.config.default_model } : {}),
      });
      metadata.push({ ...base, available: true });
    } else metadata.push({ ...base, ...(problem ? { problem } : {}) });
  }
  // Longest first, so a secret that contains another is replaced whole.
  const values = [...secrets.values()]
    .map((credential) => credential.apiKey)
    .sort((a, b) => b.length - a.length);
  return {
    get: (id) => secrets.get(id),
    forProvider: (provider) => [...secrets.values()].find((credential) => credential.provider === provider),
    list: () => metadata.map((entry) => ({ ...entry })),
    redact(text) {
      let out = text;
      for (const value of values) if (out.includes(value)) out = out.split(value).join(redactedMarker);
      return out;
    },
    hasSecrets: values.length > 0,
    toJSON: () => metadata.map((entry) => ({ ...entry })),
  };
}

/** Plain text, or a JSON/YAML document when `fileKey` names a (dotted) key in it. */
function readSecretFile(path: string, fileKey: string | undefined): string | undefined {
  const text = readFileSync(path, 'utf8');
  if (!fileKey) return text.trim() || undefined;
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    document = yamlParser().parse(text);
  }
  let value: unknown = document;
  for (const part of fileKey.split('.')) {
    value =
      typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[part] : undefined;
  }
  return typeof value === 'string' && value.trim() ? value.trim() : undefined;
}

/** Deeply redacts secrets from a JSON-like value (strings anywhere in it). Returns the input when clean. */
export function redactValue<T>(value: T, vault: CredentialVault): T {
  if (!vault.hasSecrets) return value;
  const text = JSON.stringify(value);
  if (text === undefined) return value;
  const clean = vault.redact(text);
  return clean === text ? value : (JSON.parse(clean) as T);
}
