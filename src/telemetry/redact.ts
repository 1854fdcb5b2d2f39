/**
 * Replaces every known secret value inside strings, anywhere in a value, with `[REDACTED]`, and every
 * string shaped like a well-known credential (OpenAI/Anthropic `sk-…`, GitHub `ghp_…`, AWS `AKIA…`,
 * `Bearer …`, PEM private keys) even when agentd was never told about it.
 * Used on tool results (before the model, memory, the ledger or any client sees them), log lines, bus
 * events that leave the process, telemetry attributes and error messages.
 */
export interface Redactor {
  redactText(text: string): string;
  redactValue<T>(value: T): T;
  /** Adds secrets learned after start-up (e.g. a token generated on first start). */
  addSecret(secret: string): void;
}

const sensitiveKeys =
  /^(api[_-]?key|apikey|authorization|password|secret|token|access[_-]?token|device[_-]?token)$/i;

/**
 * Credential shapes. Long enough minimum lengths that ordinary words (`sk-learn`, `task-ids`) survive; a
 * `Bearer` keeps its scheme so a reader still sees what was there.
 */
const secretShapes: ReadonlyArray<{ pattern: RegExp; replacement: string }> = [
  {
    pattern: /-----BEGIN[A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]*PRIVATE KEY-----|$)/g,
    replacement: '[REDACTED]',
  },
  { pattern: /\bsk-(?:ant-)?[A-Za-z0-9_-]{20,}/g, replacement: '[REDACTED]' },
  { pattern: /\bgh[pousr]_[A-Za-z0-9]{30,}/g, replacement: '[REDACTED]' },
  { pattern: /\bgithub_pat_[A-Za-z0-9_]{30,}/g, replacement: '[REDACTED]' },
  { pattern: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, replacement: '[REDACTED]' },
  { pattern: /\bxox[abposr]-[A-Za-z0-9-]{10,}/g, replacement: '[REDACTED]' },
  { pattern: /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{16,}/gi, replacement: '$1 [REDACTED]' },
];

/**
 * Matches wherever any of `secretShapes` could start (and more): most text has none of these, and one scan
 * for them is several times cheaper than running every shape. Keep it a superset when a shape is added.
 * Spelled case by case rather than with the `i` flag, which makes the scan ~3× slower.
 */
const possibleShape =
  /-----BEGIN|sk-|gh[pousr]_|github_pat_|A[KS]IA|xox[abposr]-|[Bb][Ee][Aa][Rr][Ee][Rr]\s|[Bb][Aa][Ss][Ii][Cc]\s/;

export function createRedactor(initialSecrets: ReadonlyArray<string> = []): Redactor {
  const secrets = new Set(initialSecrets.filter((secret) => secret.length >= 4));

  const redactText = (text: string): string => {
    let out = text;
    for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join('[REDACTED]');
    if (!possibleShape.test(out)) return out;
    for (const shape of secretShapes) out = out.replace(shape.pattern, shape.replacement);
    return out;
  };

  /**
   * Copy on write: a value with nothing to redact comes back as it is (most bus events and log arguments),
   * and only the objects and arrays on the way to a redacted string are copied. The input is never changed.
   */
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
    if (Array.isArray(value)) {
      let copy: unknown[] | undefined;
      for (let index = 0; index < value.length; index++) {
        const item: unknown = value[index];
        const redacted = redactValue(item, depth + 1);
        if (redacted === item && copy === undefined) continue;
        copy ??= value.slice(0, index);
        copy.push(redacted);
      }
      return copy ?? value;
    }
    let copy: Record<string, unknown> | undefined;
    for (const key in value) {
      if (!Object.hasOwn(value, key)) continue;
      const inner = (value as Record<string, unknown>)[key];
      const redacted =
        sensitiveKeys.test(key) && typeof inner === 'string' && inner.length > 0
          ? '[REDACTED]'
          : redactValue(inner, depth + 1);
      if (redacted === inner) continue;
      copy ??= { ...(value as Record<string, unknown>) };
      copy[key] = redacted;
    }
    return copy ?? value;
  };

  return {
    redactText,
    redactValue: <T>(value: T) => redactValue(value, 0) as T,
    addSecret(secret) {
      if (secret.length >= 4) secrets.add(secret);
    },
  };
}
