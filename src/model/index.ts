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
