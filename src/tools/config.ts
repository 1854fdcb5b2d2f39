import { z } from 'zod';

/** The `tools:` section of agentd.yaml. (The top-level `policy:` section is `policyConfigSchema`.) */
export const toolsConfigSchema = z.object({
  /** Custom tool modules (`./my-tools.js`), resolved relative to agentd.yaml; see loadToolModules. */
  modules: z.array(z.string().min(1)).default([]),
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
  /**
   * How hooks and bash are started: `namespace` runs them in fresh user/PID/mount namespaces (they cannot
   * see agentd's process or its environment), `none` as plain children, `auto` = namespace when it works.
   */
  isolation: z.enum(['auto', 'namespace', 'none']).default('auto'),
  /** Extra environment variables for hooks and bash (nothing of agentd's own environment is inherited). */
  child_env: z.record(z.string(), z.string()).default({}),
  hooks: z
    .object({
      /** Directory of executable hooks; default `<state dir>/hooks`. Must not lie inside the workspace. */
      dir: z.string().min(1).optional(),
      fail_mode: z.enum(['open', 'closed']).default('closed'),
      timeout_ms: z.number().int().positive().default(10_000),
    })
    .prefault({}),
});

export type ToolsConfig = z.output<typeof toolsConfigSchema>;
