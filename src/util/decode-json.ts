import { z } from 'zod';
import { AgentdError, ErrorCodes, type ErrorFault } from './errors.js';
import { formatZodIssues } from './safe-json.js';

/** Larger stored documents are refused rather than parsed: a corrupt length must not exhaust memory. */
export const defaultDecodeMaxBytes = 16 * 1024 * 1024;

export interface DecodeJsonOptions {
  /** Default `defaultDecodeMaxBytes`. */
  maxBytes?: number;
  /** Names the document in the error message (`workflow task wft_1`). */
  what?: string;
  /** Whose fault a bad document is: `system` (default) for what agentd stored itself, `user` for input. */
  fault?: ErrorFault;
}

function undecodable(
  what: string,
  why: string,
  fault: ErrorFault,
  details?: Record<string, unknown>,
): AgentdError {
  return new AgentdError({
    code: ErrorCodes.jsonUndecodable,
    message: `${what} cannot be read: ${why}`,
    fault,
    ...(details ? { details } : {}),
  });
}

/**
 * The one way stored JSON is read back: size-limited, parsed, then decoded by a zod schema (which may
 * upgrade older versions, see `versioned`). Every failure is a JSON_UNDECODABLE error naming the document
 * and the first problems, never a half-typed value.
 */
export function decodeJson<T>(text: string, schema: z.ZodType<T>, options: DecodeJsonOptions = {}): T {
  const what = options.what ?? 'the document';
  const fault = options.fault ?? 'system';
  const maxBytes = options.maxBytes ?? defaultDecodeMaxBytes;
  // Length in UTF-16 units bounds the byte length from below; only count bytes when it could matter.
  if (text.length > maxBytes / 3) {
    const size = Buffer.byteLength(text, 'utf8');
    if (size > maxBytes)
      throw undecodable(what, `it is ${size} bytes; the limit is ${maxBytes}`, fault, {
        sizeBytes: size,
        maxBytes,
      });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw undecodable(what, `it is not JSON (${(error as Error).message})`, fault);
  }
  const result = schema.safeParse(value);
  if (!result.success) {
    throw undecodable(what, formatZodIssues(result.error.issues), fault, {
      issues: result.error.issues.slice(0, 5).map((issue) => ({
        path: issue.path.map(String),
        message: issue.message,
      })),
    });
  }
  return result.data;
}

/** Upgrades from version N (the key) to N + 1; records written before versioning are version 0. */
export type VersionUpgrades = Readonly<
  Record<number, (record: Record<string, unknown>) => Record<string, unknown>>
>;

/**
 * A schema for a persisted object carrying `schemaVersion`: an older record is upgraded step by step to
 * `current` and then checked by `schema`; a record from a newer build is refused (it may mean things this
 * build does not know). A record without `schemaVersion` is version 0.
 */
export function versioned<T>(
  current: number,
  schema: z.ZodType<T>,
  upgrades: VersionUpgrades = {},
): z.ZodType<T> {
  return z.unknown().transform((value, context): T => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      context.addIssue({ code: 'custom', message: 'expected an object' });
      return z.NEVER;
    }
    let record = value as Record<string, unknown>;
    const stated = record.schemaVersion ?? 0;
    if (typeof stated !== 'number' || !Number.isInteger(stated) || stated < 0) {
      context.addIssue({ code: 'custom', path: ['schemaVersion'], message: 'expected a whole number' });
      return z.NEVER;
    }
    if (stated > current) {
      context.addIssue({
        code: 'custom',
        path: ['schemaVersion'],
        message: `written by a newer agentd (version ${stated}; this build reads up to ${current})`,
      });
      return z.NEVER;
    }
    for (let version = stated; version < current; version++) {
      const upgrade = upgrades[version];
      record = { ...(upgrade ? upgrade(record) : record), schemaVersion: version + 1 };
    }
    const result = schema.safeParse(record);
    if (!result.success) {
      for (const issue of result.error.issues)
        context.addIssue({ code: 'custom', path: issue.path, message: issue.message });
      return z.NEVER;
    }
    return result.data;
  }) as unknown as z.ZodType<T>;
}
