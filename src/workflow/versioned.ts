import { z } from 'zod';

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
