import type { z } from 'zod';
import { ErrorCodes, UserInputError } from './errors.js';

/**
 * The only way untrusted JSON enters agentd: size-limited, then schema-checked.
 * Throws UserInputError with PAYLOAD_TOO_LARGE or INVALID_REQUEST.
 */
export function parseUntrustedJson<T>(
  text: string,
  schema: z.ZodType<T>,
  options: { maxBytes: number; what?: string },
): T {
  const what = options.what ?? 'input';
  const size = Buffer.byteLength(text, 'utf8');
  if (size > options.maxBytes) {
    throw new UserInputError({
      code: ErrorCodes.payloadTooLarge,
      message: `${what} is ${size} bytes; the limit is ${options.maxBytes} bytes.`,
      details: { sizeBytes: size, maxBytes: options.maxBytes },
    });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `${what} is not valid JSON: ${(error as Error).message}`,
    });
  }
  const result = schema.safeParse(value);
  if (!result.success) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `${what} does not match the expected shape: ${formatZodIssues(result.error.issues)}`,
      details: {
        issues: result.error.issues.map((issue) => ({
          path: issue.path.map(String),
          message: issue.message,
        })),
      },
    });
  }
  return result.data;
}

/** `a.b[2]: expected string; c: required` — short, readable, path-first. */
export function formatZodIssues(
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>,
): string {
  return issues
    .slice(0, 5)
    .map((issue) => `${issue.path.length ? issue.path.map(String).join('.') : '(root)'}: ${issue.message}`)
    .join('; ');
}
