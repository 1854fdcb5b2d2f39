export { type CompactionReport, compactIfNeeded, formatLedgerForContext } from './compaction.js';
export { type EngageConfig, engageConfigSchema, engageOptionsFromConfig } from './config.js';
export {
  blockSummaryLimits,
  type ContextWindow,
  createContextWindow,
  formatBlockSummary,
  formatStepSummary,
  type LearnedEntry,
  pairSafeTail,
  type StepMarker,
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
