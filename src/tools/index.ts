export { type BashToolOptions, createBashTool } from './builtin/bash.js';
export { createFileTools, type FileToolsOptions } from './builtin/files.js';
export { createHttpFetchTool, type HttpFetchToolOptions } from './builtin/http-fetch.js';
export { type BuiltinToolsOptions, createBuiltinTools } from './builtin/index.js';
export { createLedgerTools } from './builtin/ledger.js';
export { createMemoryTools, type MemoryToolBackend } from './builtin/memory.js';
export { type ChildIsolation, type IsolationChoice, namespaceLauncher } from './child-process.js';
export { type ToolsConfig, toolsConfigSchema } from './config.js';
export {
  type ExecuteToolCallOptions,
  executeToolCall,
  executeToolCallTo,
  type ToolApprovalRequest,
  type ToolApprover,
  type ToolCallOutcome,
  type ToolCallStatus,
  type ToolOutcomeSink,
} from './execute.js';
export {
  type CreateHookPipelineOptions,
  createHookPipeline,
  type Hook,
  type HookDecision,
  type HookEvent,
  type HookOutcome,
  type HookPayloads,
  type HookPipeline,
  hookEvents,
} from './hooks.js';
export {
  type LoadToolModulesOptions,
  loadToolModules,
  type ModuleTool,
  toolModuleNameTaken,
} from './modules.js';
export {
  createPolicy,
  type Policy,
  type PolicyConfig,
  type PolicyDecision,
  type PolicyRequest,
  policyConfigSchema,
} from './policy.js';
export { createToolRegistry, type ToolRegistry, type ToolRegistryOptions } from './registry.js';
export {
  defineTool,
  type ToolContext,
  type ToolDefinition,
  type ToolResult,
  type ToolResultMetadata,
  toolNamePattern,
} from './tool.js';
export {
  pathOutsideWorkspaceCode,
  pathProtectedCode,
  policyPathOf,
  resolveWorkspacePath,
  type WorkspacePath,
} from './workspace-path.js';
