export {
  type CreateMcpClientManagerOptions,
  createMcpClientManager,
  type McpClientManager,
  type McpServerState,
  type McpServerStatus,
  mcpToolName,
} from './client.js';
export { type McpConfig, type McpServerConfig, mcpConfigSchema, mcpSecrets } from './config.js';
