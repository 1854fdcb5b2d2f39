import type { z } from 'zod';
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
 * `text`'s size in UTF-8 bytes when it is above `maxBytes`, else undefined. Its length in UTF-16 units
 * bounds the byte length from below (at most 3 bytes a unit), so bytes are only counted when it could matter.
 */
export function utf8BytesOver(text: string, maxBytes: number): number | undefined {
  if (text.length <= maxBytes / 3) return undefined;
  const size = Buffer.byteLength(text, 'utf8');
  return size > maxBytes ? size : undefined;
}

/**
 * The one way stored JSON is read back: size-limited, parsed, then decoded by a zod schema (which may
 * upgrade older versions, as the workflow records' `versioned` schemas do). Every failure is a
 * JSON_UNDECODABLE error naming the document and the first problems, never a half-typed value.
 */
export function decodeJson<T>(text: string, schema: z.ZodType<T>, options: DecodeJsonOptions = {}): T {
  const what = options.what ?? 'the document';
  const fault = options.fault ?? 'system';
  const maxBytes = options.maxBytes ?? defaultDecodeMaxBytes;
  const size = utf8BytesOver(text, maxBytes);
  if (size !== undefined)
    throw undecodable(what, `it is ${size} bytes; the limit is ${maxBytes}`, fault, {
      sizeBytes: size,
      maxBytes,
    });
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
