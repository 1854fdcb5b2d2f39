/**
 * Replaces every known secret value inside strings, anywhere in a value, with `[REDACTED]`.
 * Used on log lines, bus events that leave the process, telemetry attributes and error messages.
 */
export interface Redactor {
  redactText(text: string): string;
  redactValue<T>(value: T): T;
  /** Adds secrets learned after start-up (e.g. a token generated on first start). */
  addSecret(secret: string): void;
}

const sensitiveKeys =
  /^(api[_-]?key|apikey|authorization|password|secret|token|access[_-]?token|device[_-]?token)$/i;

export function createRedactor(initialSecrets: ReadonlyArray<string> = []): Redactor {
  const secrets = new Set(initialSecrets.filter((secret) => secret.length >= 4));

  const redactText = (text: string): string => {
    let out = text;
    for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join('[REDACTED]');
    return out;
  };

  const redactValue = (value: unknown, depth: number): unknown => {
    if (typeof value === 'string') return redactText(value);
    if (depth > 8 || value === null || typeof value !== 'object') return value;
    if (value instanceof Error) {
      return {
        name: value.name,
        message: redactText(value.message),
        code: (value as { code?: unknown }).code,
      };
    }
    if (Array.isArray(value)) return value.map((item) => redactValue(item, depth + 1));
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value)) {
      out[key] =
        sensitiveKeys.test(key) && typeof inner === 'string' && inner.length > 0
          ? '[REDACTED]'
          : redactValue(inner, depth + 1);
    }
    return out;
  };

  return {
    redactText,
    redactValue: <T>(value: T) => redactValue(value, 0) as T,
    addSecret(secret) {
      if (secret.length >= 4) secrets.add(secret);
    },
  };
}
