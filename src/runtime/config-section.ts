import type { z } from 'zod';
import { ErrorCodes, formatZodIssues, UserInputError } from '../util/index.js';

/** Parses one subsystem section of agentd.yaml with that subsystem's schema; errors name the section and path. */
export function parseSection<Schema extends z.ZodType>(
  schema: Schema,
  raw: unknown,
  name: string,
): z.output<Schema> {
  const parsed = schema.safeParse(raw ?? {});
  if (!parsed.success) {
    throw new UserInputError({
      code: ErrorCodes.invalidConfig,
      message: `agentd.yaml ${name}: ${formatZodIssues(parsed.error.issues)}`,
    });
  }
  return parsed.data;
}
