export {
  type CreateMcpClientManagerOptions,
  createMcpClientManager,
  type McpClientManager,
  type McpServerState,
  type McpServerStatus,
  mcpToolName,
  stdioServerEnv,
} from './client.js';
export { type McpConfig, type McpServerConfig, mcpConfigSchema, mcpSecrets } from './config.js';
