import { z } from 'zod';
import { sandboxLanguages } from './protocol.js';

/** The `sandbox:` section of agentd.yaml: the `execute_code` tool and its limits. */
export const sandboxConfigSchema = z.object({
  /** Offers `execute_code` to agents; policy rules and an agent's tool list can still take it away. */
  enabled: z.boolean().default(true),
  languages: z.array(z.enum(sandboxLanguages)).min(1).default(['javascript', 'python']),
  /** Wall time of one execution, unless the call asks for less (or more, up to `max_timeout_ms`). */
  timeout_ms: z.number().int().positive().default(10_000),
  max_timeout_ms: z.number().int().positive().default(60_000),
  /** Engine memory: the QuickJS heap, Pyodide's linear memory (the interpreter itself uses ~40 MiB of it). */
  memory_mib: z.number().int().min(16).default(256),
  /** stdout and stderr together. */
  max_output_bytes: z
    .number()
    .int()
    .positive()
    .default(64 * 1024),
  /** The JSON of the returned value. */
  max_result_bytes: z
    .number()
    .int()
    .positive()
    .default(64 * 1024),
  max_tool_calls: z.number().int().min(0).default(100),
  /** JavaScript recursion is bounded by the QuickJS stack; Python's by its recursion limit. */
  max_stack_kib: z.number().int().min(64).default(512),
  python_recursion_limit: z.number().int().min(50).default(500),
  workers: z
    .object({
      javascript: z.number().int().min(1).default(2),
      python: z.number().int().min(1).default(1),
    })
    .prefault({}),
  /** A worker whose engine is not ready by then is given up; Pyodide needs ~1.3 s on an idle core. */
  start_timeout_ms: z.number().int().positive().default(60_000),
  /** Languages whose first worker starts with the runtime instead of at the first execution. */
  prewarm: z.array(z.enum(sandboxLanguages)).default([]),
  /**
   * Workspace files copied into the virtual file system (`/workspace/<path>` in Python, `files` in
   * JavaScript). They are read with `read_file` and written back with `write_file`, so the same policy
   * rules and hooks decide; only `writable` files are written back.
   */
  files: z.array(z.object({ path: z.string().min(1), writable: z.boolean().default(false) })).default([]),
});

export type SandboxConfig = z.output<typeof sandboxConfigSchema>;
