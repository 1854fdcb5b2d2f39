import { z } from 'zod';

/**
 * The manifests of a workflow directory, one zod schema per file. Field names are snake_case,
 * because they are the on-disk contract; objects are strict so a misspelt field is an error, not a silent
 * default. `scripts/generate-schemas.ts` turns these into JSON Schema files for editors (`schemas/`).
 */

export const nodeRoles = ['start', 'linear', 'decision', 'branch', 'split', 'merge', 'exit'] as const;
export type NodeRole = (typeof nodeRoles)[number];
export const nodeKinds = ['agent', 'deterministic'] as const;
export type NodeKind = (typeof nodeKinds)[number];
export const mergeFailureModes = ['fail_on_any', 'ignore_failures', 'partial'] as const;
export type MergeFailureMode = (typeof mergeFailureModes)[number];

const identifier = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9_.-]+$/, 'expected an id of letters, digits, "_", "." or "-"');

/** Roles are case-insensitive in YAML (`DECISION` and `decision` both work). */
const roleSchema = z.preprocess(
  (value) => (typeof value === 'string' ? value.toLowerCase() : value),
  z.enum(nodeRoles),
);

export const workflowNodeSchema = z.strictObject({
  id: identifier,
  name: z.string().optional(),
  description: z.string().optional(),
  kind: z.enum(nodeKinds),
  role: roleSchema,
  default_start: z.boolean().default(false),
  agent_id: identifier.optional(),
  tools: z.array(identifier).default([]),
  inputs_schema_id: identifier.optional(),
  outputs_schema_id: identifier.optional(),
  continue_on_failure: z.boolean().default(false),
  always_fail: z.boolean().default(false),
  context: z.string().min(1, 'expected a context profile id, "global" or "none"'),
  merge: z.record(z.string(), z.unknown()).optional(),
  merge_failure_mode: z.enum(mergeFailureModes).default('fail_on_any'),
  metadata: z.record(z.string(), z.unknown()).default({}),
});
export type WorkflowNodeManifest = z.output<typeof workflowNodeSchema>;

export const workflowEdgeSchema = z.strictObject({
  from: identifier,
  to: identifier,
  label: z.string().min(1).optional(),
  condition: z.string().min(1).optional(),
});
export type WorkflowEdgeManifest = z.output<typeof workflowEdgeSchema>;

export const workflowManifestSchema = z.strictObject({
  version: z.union([z.string(), z.number()]).transform(String),
  id: identifier.optional(),
  description: z.string().optional(),
  nodes: z.array(workflowNodeSchema).min(1, 'expected at least one node'),
  edges: z.array(workflowEdgeSchema).default([]),
});
export type WorkflowManifest = z.output<typeof workflowManifestSchema>;

export const agentManifestSchema = z.strictObject({
  agents: z
    .array(
      z.strictObject({
        id: identifier,
        kind: z.literal('agent').default('agent'),
        /** `provider/model`, e.g. `anthropic/claude-sonnet-4-5` or `local/default`. */
        llm: z.string().regex(/^[^/\s]+\/\S+$/, 'expected "provider/model"'),
        description: z.string().optional(),
        /** The system prompt of the agent. */
        instructions: z.string().optional(),
        credential_id: identifier.optional(),
        config: z
          .strictObject({
            temperature: z.number().min(0).max(2).optional(),
            max_tokens: z.number().int().positive().optional(),
            max_turns: z.number().int().positive().optional(),
            timeout_ms: z.number().int().positive().optional(),
          })
          .default({}),
      }),
    )
    .default([]),
});
export type AgentManifest = z.output<typeof agentManifestSchema>;
export type AgentDefinition = AgentManifest['agents'][number];

export const toolManifestSchema = z.strictObject({
  tools: z
    .array(
      z.strictObject({
        id: identifier,
        type: z.string().default('function'),
        description: z.string().optional(),
        /** `builtin:<name>`, `function:<name>` (registered with the engine) or `<relative module path>#<export>`. */
        entrypoint: z
          .string()
          .regex(
            /^(builtin:|function:)?[^#\s]+(#[A-Za-z_$][\w$]*)?$/,
            'expected "builtin:name", "function:name" or "path#export"',
          ),
        /** JSON Schema of the tool's input; a mismatch is tool misuse and fails the node. */
        input_schema: z.record(z.string(), z.unknown()).optional(),
        permissions: z
          .strictObject({
            allow_network: z.boolean().default(false),
            allow_shell: z.boolean().default(false),
            /** Folder the tool may touch, relative to the workflow's working directory. */
            root: z.string().optional(),
          })
          .default({ allow_network: false, allow_shell: false }),
      }),
    )
    .default([]),
});
export type ToolManifest = z.output<typeof toolManifestSchema>;
export type ToolManifestEntry = ToolManifest['tools'][number];

export const memoryBackends = ['in_memory', 'sqlite'] as const;
export type MemoryBackend = (typeof memoryBackends)[number];

/**
 * `jsonl` (and its older name `file`) kept a store in a JSON Lines file of its own; persistent stores now
 * live in the platform's database, so both read as `sqlite` and old manifests keep loading.
 */
const persistentAliases = new Set(['jsonl', 'file']);
const backendSchema = z.preprocess(
  (value) => (typeof value === 'string' && persistentAliases.has(value) ? 'sqlite' : value),
  z.enum(memoryBackends),
);

const storeConfigSchema = z
  .strictObject({
    backend: backendSchema.optional(),
    type: backendSchema.optional(),
    retention: z.strictObject({ max_items: z.number().int().positive() }).optional(),
  })
  .transform((store) => ({
    backend: (store.backend ?? store.type ?? 'in_memory') as MemoryBackend,
    maxItems: store.retention?.max_items,
  }));

export const contextProfileSchema = z.strictObject({
  id: identifier,
  max_tokens: z.number().int().positive(),
  retrieval_policy: z.enum(['recency', 'semantic', 'hybrid']).default('recency'),
  sources: z
    .array(
      z.strictObject({ store: z.enum(['task', 'project', 'global']), tags: z.array(z.string()).default([]) }),
    )
    .min(1, 'expected at least one source'),
  metadata: z.record(z.string(), z.unknown()).default({}),
});
export type ContextProfile = z.output<typeof contextProfileSchema>;

const defaultStore = { backend: 'in_memory' as MemoryBackend, maxItems: undefined as number | undefined };

export const memoryManifestSchema = z.strictObject({
  memory: z
    .strictObject({
      task_store: storeConfigSchema.default(defaultStore),
      project_store: storeConfigSchema.default(defaultStore),
      global_store: storeConfigSchema.default(defaultStore),
      context_profiles: z.array(contextProfileSchema).default([]),
      /** Budget of the built-in `global` context (the global store, newest first). */
      global_context_max_tokens: z.number().int().positive().default(2048),
    })
    .default({
      task_store: defaultStore,
      project_store: defaultStore,
      global_store: defaultStore,
      context_profiles: [],
      global_context_max_tokens: 2048,
    }),
});
export type MemoryManifest = z.output<typeof memoryManifestSchema>;

export const policyManifestSchema = z.strictObject({
  policies: z
    .array(
      z.strictObject({
        name: z.string().min(1),
        enabled: z.boolean().default(true),
        rules: z.array(
          z.strictObject({
            target: z.enum(['tool', 'context', 'node']),
            target_id: z.string().min(1),
            action: z.enum(['allow', 'deny']),
            reason: z.string().optional(),
          }),
        ),
      }),
    )
    .default([]),
});
export type PolicyManifest = z.output<typeof policyManifestSchema>;

export const schedulerManifestSchema = z.strictObject({
  scheduler: z
    .strictObject({
      enabled: z.boolean().default(true),
      max_concurrency: z.number().int().positive().default(1),
      queue_policy: z.literal('fifo').default('fifo'),
      /** `null` means unbounded. */
      max_queue_size: z.number().int().nonnegative().nullable().default(100),
    })
    .default({ enabled: true, max_concurrency: 1, queue_policy: 'fifo', max_queue_size: 100 }),
});
export type SchedulerManifest = z.output<typeof schedulerManifestSchema>;

export const credentialsManifestSchema = z.strictObject({
  provider_credentials: z
    .array(
      z.strictObject({
        id: identifier,
        provider: z.string().min(1),
        auth: z
          .strictObject({
            type: z.literal('api_key'),
            source: z.enum(['env', 'file']),
            env_var: z.string().min(1).optional(),
            file_path: z.string().min(1).optional(),
            file_key: z.string().min(1).optional(),
          })
          .superRefine((auth, context) => {
            if (auth.source === 'env' && !auth.env_var) {
              context.addIssue({
                code: 'custom',
                path: ['env_var'],
                message: 'expected env_var when source is "env"',
              });
            }
            if (auth.source === 'file' && !auth.file_path) {
              context.addIssue({
                code: 'custom',
                path: ['file_path'],
                message: 'expected file_path when source is "file"',
              });
            }
          }),
        config: z
          .strictObject({ base_url: z.url().optional(), default_model: z.string().optional() })
          .default({}),
      }),
    )
    .default([]),
});
export type CredentialsManifest = z.output<typeof credentialsManifestSchema>;
export type ProviderCredentialEntry = CredentialsManifest['provider_credentials'][number];

export const assertionTypes = ['equals', 'contains', 'schema_valid', 'status', 'custom'] as const;

export const evaluationManifestSchema = z.strictObject({
  suites: z
    .array(
      z.strictObject({
        name: identifier,
        description: z.string().optional(),
        tags: z.array(z.string()).default([]),
        cases: z
          .array(
            z.strictObject({
              id: identifier,
              description: z.string().optional(),
              input: z.unknown(),
              assertions: z
                .array(
                  z.strictObject({
                    type: z.enum(assertionTypes),
                    /** Dotted path into the run's output (`title`, `sections.0`); the whole output when omitted. */
                    field_path: z.string().optional(),
                    expected: z.unknown().optional(),
                    /** For `custom`: a function registered with the engine or `path#export`. */
                    function: z.string().optional(),
                  }),
                )
                .min(1, 'expected at least one assertion'),
              tags: z.array(z.string()).default([]),
            }),
          )
          .min(1, 'expected at least one case'),
      }),
    )
    .default([]),
});
export type EvaluationManifest = z.output<typeof evaluationManifestSchema>;
export type EvaluationSuite = EvaluationManifest['suites'][number];
export type EvaluationCase = EvaluationSuite['cases'][number];
export type EvaluationAssertion = EvaluationCase['assertions'][number];

export const pluginManifestSchema = z.strictObject({
  plugins: z
    .array(
      z.strictObject({
        id: identifier,
        /** `<relative module path>#<export>`; the export is a plugin object or a factory `(config) => plugin`. */
        entrypoint: z.string().min(1),
        enabled: z.boolean().default(true),
        config: z.record(z.string(), z.unknown()).default({}),
      }),
    )
    .default([]),
});
export type PluginManifest = z.output<typeof pluginManifestSchema>;

export const cliProfilesManifestSchema = z.strictObject({
  profiles: z
    .array(
      z.strictObject({
        id: identifier,
        label: z.string().optional(),
        description: z.string().optional(),
        default_config_dir: z.string().optional(),
        default_workflow_id: z.string().optional(),
        session_policies: z
          .strictObject({
            persist_history: z.boolean().default(true),
            /** Relative to the workflow's state directory. */
            history_file: z.string().default('repl_history.jsonl'),
            max_history_items: z.number().int().positive().default(200),
          })
          .default({ persist_history: true, history_file: 'repl_history.jsonl', max_history_items: 200 }),
        /** Fields merged into every workflow input sent from the REPL (`{ request: <line>, ...input_mappings }`). */
        input_mappings: z.record(z.string(), z.unknown()).default({}),
        telemetry_overlays: z
          .strictObject({
            enabled: z.boolean().default(true),
            level: z.enum(['summary', 'verbose']).default('summary'),
            /** Event types shown; all node events when empty. */
            filters: z.array(z.string()).default([]),
          })
          .default({ enabled: true, level: 'summary', filters: [] }),
        custom_commands: z
          .array(
            z.strictObject({
              name: z.string().regex(/^[a-z][a-z0-9-]*$/, 'expected a lower-case command name without "/"'),
              entrypoint: z.string().min(1),
              description: z.string().optional(),
              aliases: z.array(z.string()).default([]),
            }),
          )
          .default([]),
      }),
    )
    .default([]),
});
export type CliProfilesManifest = z.output<typeof cliProfilesManifestSchema>;
export type CliProfile = CliProfilesManifest['profiles'][number];

/** Every manifest file a workflow directory may hold, with its schema. `workflow.yaml` alone is required. */
export const manifestFiles = {
  workflow: { file: 'workflow.yaml', schema: workflowManifestSchema, required: true },
  agents: { file: 'agents.yaml', schema: agentManifestSchema, required: false },
  tools: { file: 'tools.yaml', schema: toolManifestSchema, required: false },
  memory: { file: 'memory.yaml', schema: memoryManifestSchema, required: false },
  policy: { file: 'policy.yaml', schema: policyManifestSchema, required: false },
  scheduler: { file: 'scheduler.yaml', schema: schedulerManifestSchema, required: false },
  credentials: { file: 'provider_credentials.yaml', schema: credentialsManifestSchema, required: false },
  evaluations: { file: 'evaluations.yaml', schema: evaluationManifestSchema, required: false },
  plugins: { file: 'plugins.yaml', schema: pluginManifestSchema, required: false },
  cliProfiles: { file: 'cli_profiles.yaml', schema: cliProfilesManifestSchema, required: false },
} as const;
export type ManifestKey = keyof typeof manifestFiles;

export interface WorkflowManifests {
  workflow: WorkflowManifest;
  agents: AgentManifest;
  tools: ToolManifest;
  memory: MemoryManifest;
  policy: PolicyManifest;
  scheduler: SchedulerManifest;
  credentials: CredentialsManifest;
  evaluations: EvaluationManifest;
  plugins: PluginManifest;
  cliProfiles: CliProfilesManifest;
}
