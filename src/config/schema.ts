import { z } from 'zod';

/** A `provider_credentials` entry: where an API key comes from. Never the key itself. */
export const providerCredentialSchema = z.object({
  id: z.string().min(1),
  provider: z.string().min(1),
  auth: z.object({
    type: z.literal('api_key').default('api_key'),
    source: z.enum(['env', 'file']),
    env_var: z.string().min(1).optional(),
    file_path: z.string().min(1).optional(),
    /** For JSON or YAML key files: which key holds the secret. Plain files hold only the secret. */
    file_key: z.string().min(1).optional(),
  }),
  config: z
    .object({
      base_url: z.string().url().optional(),
      default_model: z.string().min(1).optional(),
    })
    .default({}),
});

export type ProviderCredentialConfig = z.infer<typeof providerCredentialSchema>;

const featureFlagsSchema = z
  .object({
    /** Planner, workers, heartbeat and the multi-agent runtime. */
    agent_runtime_v1: z.boolean().default(true),
    /** RAM/LTM memory, recall and the memory manager. */
    memory_v1: z.boolean().default(true),
    /** The worker pool that runs delegated tasks. */
    workers_v1: z.boolean().default(true),
  })
  .default({ agent_runtime_v1: true, memory_v1: true, workers_v1: true });

/** An agent defined in agentd.yaml. More agents can be spawned at run time. */
export const agentDefinitionSchema = z.object({
  id: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'lowercase letters, digits, - and _, at most 64 characters'),
  name: z.string().optional(),
  model: z.string().optional(),
  /** Workspace folder of this agent (identity files, skills); defaults to `<home>/workspace`. */
  workspace: z.string().optional(),
  tools: z.array(z.string()).optional(),
  role: z.string().optional(),
});

/**
 * The shape of agentd.yaml. Subsystem sections (memory, engage, gateway, workers, heartbeat, …) are kept
 * as raw objects here and parsed by each subsystem's own schema in the composition root, so this L1
 * module never imports higher layers.
 */
export const configFileSchema = z
  .object({
    model: z.string().min(1).optional(),
    home: z.string().min(1).optional(),
    host: z.string().min(1).optional(),
    port: z.number().int().min(0).max(65535).optional(),
    database_url: z.string().min(1).optional(),
    log_level: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).optional(),
    features: featureFlagsSchema.optional(),
    provider_credentials: z.array(providerCredentialSchema).optional(),
    agents: z.array(agentDefinitionSchema).optional(),
    agent_runtime: z.record(z.string(), z.unknown()).optional(),
    chat: z.record(z.string(), z.unknown()).optional(),
    memory: z.record(z.string(), z.unknown()).optional(),
    engage: z.record(z.string(), z.unknown()).optional(),
    gateway: z.record(z.string(), z.unknown()).optional(),
    workers: z.record(z.string(), z.unknown()).optional(),
    work: z.record(z.string(), z.unknown()).optional(),
    heartbeat: z.record(z.string(), z.unknown()).optional(),
    tools: z.record(z.string(), z.unknown()).optional(),
    policy: z.record(z.string(), z.unknown()).optional(),
    mcp: z.record(z.string(), z.unknown()).optional(),
    sandbox: z.record(z.string(), z.unknown()).optional(),
    workflows: z.record(z.string(), z.unknown()).optional(),
    skills: z.record(z.string(), z.unknown()).optional(),
    audit: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

/** The parsed shape of `agentd.yaml` (see `configFileSchema`). */
export type ConfigFile = z.infer<typeof configFileSchema>;
/** The `features:` switches of `agentd.yaml`. */
export type FeatureFlags = z.infer<typeof featureFlagsSchema>;
/** One agent of `agents:` in `agentd.yaml`, or from `defineAgent` in code. */
export type AgentDefinition = z.infer<typeof agentDefinitionSchema>;
