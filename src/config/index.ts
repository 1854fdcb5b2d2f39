export { defineAgent } from './define-agent.js';
export {
  type AgentdConfig,
  type LoadConfigOptions,
  loadConfig,
  providerSettings,
  type ResolvedCredential,
} from './load.js';
export {
  type AgentDefinition,
  agentDefinitionSchema,
  type ConfigFile,
  configFileSchema,
  type FeatureFlags,
  type ProviderCredentialConfig,
  providerCredentialSchema,
} from './schema.js';
