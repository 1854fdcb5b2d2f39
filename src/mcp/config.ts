import { z } from 'zod';

const serverNamePattern = /^[A-Za-z0-9_-]{1,32}$/;

const stdioServerSchema = z
  .object({
    command: z.string().min(1),
    args: z.array(z.string()).default([]),
    /** The only variables the server gets besides PATH, HOME, USER, SHELL, TERM and LOGNAME. */
    env: z.record(z.string(), z.string()).default({}),
    cwd: z.string().min(1).optional(),
    enabled: z.boolean().default(true),
  })
  .strict();

const httpServerSchema = z
  .object({
    /** A Streamable HTTP endpoint, e.g. `http://127.0.0.1:9000/mcp`. */
    url: z.url({ protocol: /^https?$/ }),
    headers: z.record(z.string(), z.string()).default({}),
    enabled: z.boolean().default(true),
  })
  .strict();

export const mcpServerConfigSchema = z.union([stdioServerSchema, httpServerSchema]);

/** The `mcp:` section of agentd.yaml. */
export const mcpConfigSchema = z.object({
  servers: z
    .record(
      z.string().regex(serverNamePattern, 'server names are letters, digits, - and _, at most 32 characters'),
      mcpServerConfigSchema,
    )
    .default({}),
  /** How long connecting (start-up, handshake and the first tool list) may take. */
  connect_timeout_ms: z.number().int().positive().default(15_000),
  /** Longest a single tool call may run before it fails. */
  call_timeout_ms: z.number().int().positive().default(120_000),
  retry: z
    .object({
      initial_delay_ms: z.number().int().positive().default(1_000),
      max_delay_ms: z.number().int().positive().default(60_000),
    })
    .prefault({}),
});

export type McpConfig = z.output<typeof mcpConfigSchema>;
export type McpServerConfig = z.output<typeof mcpServerConfigSchema>;

/** Every value in the section that could be a secret (env values, header values), for redaction. */
export function mcpSecrets(config: McpConfig): string[] {
  return Object.values(config.servers).flatMap((server) =>
    'url' in server ? Object.values(server.headers) : Object.values(server.env),
  );
}
