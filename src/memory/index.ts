export { createMemoryAccess, type MemoryAccess } from './access.js';
export {
  type MemoryConfig,
  type MemoryConfigInput,
  type MemoryEmbeddingsConfig,
  memoryConfigSchema,
  memoryEmbeddingsConfigSchema,
} from './config.js';
export {
  createHashingEmbedder,
  createOpenAiEmbedder,
  type EmbeddingProvider,
  type OpenAiEmbedderOptions,
} from './embeddings.js';
export { toSpiderwebMemoryEvent } from './events.js';
export { parseMemoryAddress, toMemoryItem, toModelMessages } from './items.js';
export {
  createMemoryManager,
  type MemoryManager,
  type MemoryManagerOptions,
  type MemoryManagerTickResult,
} from './manager.js';
export {
  type ArchiveOptions,
  createMemoryService,
  type MemoryService,
  type MemoryServiceOptions,
  type MemoryStatus,
  type SummarizeOptions,
  type SummarizeResult,
} from './service.js';
export { extractiveSummary } from './summarizer.js';
export type {
  AppendInput,
  ArchiveResult,
  HistoryEntry,
  HistoryOptions,
  MemoryEntry,
  MemoryEntryItem,
  MemoryEventKind,
  MemoryEventPayload,
  MemoryItem,
  MemoryKind,
  MemoryRole,
  MemorySource,
  MemoryState,
  MemorySummaryItem,
  MessageMark,
  PinLease,
  QueryOptions,
  RecallOptions,
  SearchHit,
  SearchOptions,
  SessionRef,
  SessionStats,
  SnapshotResult,
} from './types.js';
