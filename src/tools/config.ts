import { z } from 'zod';

/** The `tools:` section of agentd.yaml. (The top-level `policy:` section is `policyConfigSchema`.) */
export const toolsConfigSchema = z.object({
  bash: z
    .object({
      enabled: z.boolean().default(false),
      timeout_ms: z.number().int().positive().default(30_000),
      max_output_bytes: z
        .number()
        .int()
        .positive()
        .default(64 * 1024),
    })
    .prefault({}),
  http_fetch: z
    .object({
      enabled: z.boolean().default(false),
      allowed_hosts: z.array(z.string().min(1)).default([]),
      timeout_ms: z.number().int().positive().default(20_000),
      max_response_bytes: z
        .number()
        .int()
        .positive()
        .default(256 * 1024),
    })
    .prefault({}),
  grep: z
    .object({
      /** Hard limit on one search; it runs in a worker thread that is terminated at the deadline. */
      timeout_ms: z.number().int().positive().default(10_000),
    })
    .prefault({}),
  /** Largest tool result passed to the model. */
  max_result_chars: z.number().int().positive().default(50_000),
  hooks: z
    .object({
      fail_mode: z.enum(['open', 'closed']).default('closed'),
      timeout_ms: z.number().int().positive().default(10_000),
    })
    .prefault({}),
});

export type ToolsConfig = z.output<typeof toolsConfigSchema>;
