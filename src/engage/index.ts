export { type CompactionReport, compactIfNeeded, formatLedgerForContext } from './compaction.js';
export { type EngageConfig, engageConfigSchema, engageOptionsFromConfig } from './config.js';
export {
  type ContextWindow,
  createContextWindow,
  formatBlockStub,
  formatStepStub,
  type LearnedEntry,
  pairSafeTail,
  type StepMarker,
  stubLimits,
} from './context-window.js';
export {
  type EngageContextOptions,
  EngageErrorCodes,
  type EngageLimits,
  type EngageOptions,
  type EngageResult,
  type EngageUsage,
  runEngage,
} from './loop.js';
