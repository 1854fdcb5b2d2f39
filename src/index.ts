/**
 * `agentd` as a library: the public API. A program builds a runtime from a config, adds its own tools and
 * agents, chats with it, hands it goals and workflows, and listens to its events — no server needed; the
 * gateway is one call away (`runtime.startGateway()`).
 *
 * ```ts
 * import { createRuntime, defineTool, loadConfig } from 'agentd';
 * import { z } from 'zod';
 *
 * const add = defineTool({
 *   name: 'add',
 *   description: 'Adds two numbers.',
 *   input: z.object({ a: z.number(), b: z.number() }),
 *   execute: async ({ a, b }) => String(a + b),
 * });
 * const runtime = await createRuntime({ config: loadConfig(), tools: [add] });
 * const reply = await runtime.sendMessage({ text: 'What is 2 + 3?' });
 * await runtime.close();
 * ```
 *
 * Everything not exported here is internal and may change without notice.
 * @packageDocumentation
 */

/** Events: every subsystem publishes typed events on the bus (`runtime.bus.on('run:finished', …)`). */
export type {
  Bus,
  BusEvent,
  BusEventMap,
  BusEventScope,
  BusEventType,
  BusFilter,
  BusHandler,
  RunStatus,
} from './bus/index.js';

/** Configuration: agentd.yaml + environment → `AgentdConfig`; agents declared in code. */
export {
  type AgentDefinition,
  type AgentdConfig,
  type ConfigFile,
  configFileSchema,
  defineAgent,
  type FeatureFlags,
  type LoadConfigOptions,
  loadConfig,
  type ResolvedCredential,
} from './config/index.js';
/** Models: the provider-neutral spec, one factory per provider, and `provider/model` name resolution. */
export {
  type AcpModelOptions,
  type AnthropicModelOptions,
  type CommandModelOptions,
  callAborted,
  commandPresets,
  createAcpModel,
  createAnthropicModel,
  createCommandModel,
  createLocalModel,
  createOpenAIModel,
  defaultModelName,
  type LanguageModel,
  type LocalModelOptions,
  type ModelCallOptions,
  type ModelMessage,
  type ModelRequest,
  type ModelResponse,
  type ModelStopReason,
  type ModelStreamError,
  type ModelStreamEvent,
  type ModelToolCall,
  type ModelToolDefinition,
  type ModelUsage,
  type OpenAIModelOptions,
  type ResolveModelOptions,
  resolveModel,
} from './model/index.js';
/** The runtime: the composition of store, model, memory, tools, agents, workflows and (optionally) the gateway. */
export {
  type CreateRuntimeOptions,
  createRuntime,
  type Runtime,
  type RuntimeWorkflowRun,
} from './runtime.js';

/** Storage: SQLite by default, Postgres with a URL, RAM for throwaway runs. */
export {
  type CreateStoreOptions,
  createMemoryStore,
  createPostgresDatabase,
  createSqliteDatabase,
  createStore,
  type PostgresDatabaseOptions,
  type SqlDatabase,
  type SqlDialect,
  type SqliteDatabaseOptions,
  type Store,
  type StoreMode,
} from './store/index.js';
/** Tools: `defineTool` for custom tools (in code or in `tools.modules`), and what a tool sees and returns. */
export {
  defineTool,
  type ToolContext,
  type ToolDefinition,
  type ToolRegistry,
  type ToolResult,
  type ToolResultMetadata,
} from './tools/index.js';
/**
 * Errors: three classes by fault, each with a stable code from `ErrorCodes`; the injectable
 * collaborators (a clock, an id generator and a logger); and the V8 setting the CLI makes for serving.
 */
export {
  AgentdError,
  type AgentdErrorOptions,
  type Clock,
  createIdGenerator,
  createManualClock,
  disableAllocationSitePretenuring,
  ErrorCodes,
  type ErrorFault,
  type IdGenerator,
  type Logger,
  ProviderError,
  SystemError,
  silentLogger,
  systemClock,
  UserInputError,
} from './util/index.js';
