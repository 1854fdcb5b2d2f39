export { type SandboxConfig, sandboxConfigSchema } from './config.js';
export {
  createSandboxPool,
  type SandboxExecutionRequest,
  type SandboxExecutionResult,
  type SandboxPool,
  type SandboxPoolOptions,
  type SandboxPoolStats,
} from './pool.js';
export { type SandboxErrorKind, type SandboxLanguage, sandboxLanguages } from './protocol.js';
export { createExecuteCodeTool, type ExecuteCodeToolOptions, executeCodeToolName } from './tool.js';
