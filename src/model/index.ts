export { type AcpModelOptions, createAcpModel, parseAcpModelName } from './acp.js';
export { type AnthropicModelOptions, createAnthropicModel } from './anthropic.js';
export {
  completeModel,
  estimateTokens,
  type ModelEventSink,
  type ModelRetryOptions,
  type StreamModelOptions,
  streamModel,
  streamModelTo,
} from './call.js';
export { type CommandModelOptions, commandPresets, createCommandModel } from './command.js';
export { contextWindowFor, defaultContextWindowTokens } from './context-windows.js';
export {
  createLocalModel,
  isOfflineModelText,
  type LocalModelOptions,
  localModelMarker,
  offlineDocumentNote,
  offlineWorkNotice,
  type PlannedTask,
  pickLabel,
  planTasks,
  realModelHowTo,
} from './local.js';
export { createOpenAIModel, type OpenAIModelOptions } from './openai.js';
export {
  defaultLocalModelName,
  defaultModelName,
  knownProviders,
  ollamaDefaultBaseUrl,
  type ProviderCredentials,
  type ProviderSettings,
  type ResolveModelOptions,
  resolveModel,
} from './registry.js';
export { renderConversation } from './render.js';
export {
  createScriptedModel,
  type ScriptedModel,
  type ScriptedModelOptions,
  type ScriptedReply,
  type ScriptedResponder,
  type ScriptedStep,
  UnexpectedModelCallError,
  unexpectedModelCallCode,
} from './scripted.js';
export type {
  LanguageModel,
  ModelCallOptions,
  ModelMessage,
  ModelRequest,
  ModelResponse,
  ModelStopReason,
  ModelStreamError,
  ModelStreamEvent,
  ModelToolCall,
  ModelToolDefinition,
  ModelUsage,
} from './spec.js';
export { callAborted } from './spec.js';
