export { asFileNotWritten, fileNotWrittenCode, writeFileAtomically } from './atomic-write.js';
export { type BackoffTimer, createBackoffTimer } from './backoff.js';
export { clipText } from './clip-text.js';
export { type Clock, createManualClock, maxTimerMs, sleep, systemClock } from './clock.js';
export { type DecodeJsonOptions, decodeJson, defaultDecodeMaxBytes, utf8BytesOver } from './decode-json.js';
export { deepFreeze } from './deep-freeze.js';
export {
  AgentdError,
  type AgentdErrorOptions,
  coerceError,
  ErrorCodes,
  type ErrorFault,
  type ErrorJson,
  errorForClient,
  ProviderError,
  SystemError,
  UserInputError,
} from './errors.js';
export { createHeldRenewal, type HeldRenewal } from './held-renewal.js';
export { createIdGenerator, createSequentialIdGenerator, type IdGenerator } from './ids.js';
export {
  type AbortSource,
  addAbortListener,
  LazyAbortController,
  removeAbortListener,
  signalOf,
} from './lazy-abort.js';
export { lazyPackage, yamlParser } from './lazy-package.js';
export { createRecordingLogger, type Logger, type RecordedLog, silentLogger } from './logger.js';
export { numberJson } from './number-json.js';
export { type Once, once } from './once.js';
export {
  noopSpan,
  registeredOtelApi,
  rootContext,
  SpanKind,
  SpanStatusCode,
  ValueType,
} from './otel-api.js';
export { packageRoot, packageVersion } from './package-root.js';
export { escapeRegExp, execLiteral, literalPattern, type PatternAround } from './patterns.js';
export {
  createPeriodicPrune,
  deleteInBatches,
  type PeriodicPrune,
  type PeriodicPruneOptions,
  type PruneBatch,
  type RetentionScheduleOptions,
} from './periodic-prune.js';
export { closeOwner, openOwner, ownerMayBeAlive } from './process-owner.js';
export { createRecentMap, type RecentMap, rememberNewest } from './recent-map.js';
export {
  createRefusedWrites,
  type RefusedWrites,
  type RefusedWritesOptions,
} from './refused-writes.js';
export { openRegularFile, readAtMost, readRegularFile } from './regular-file.js';
export { isStoreUnavailable, type RetryOptions, retrying } from './retry.js';
export { formatZodIssues, parseUntrustedJson } from './safe-json.js';
export {
  createFifoLock,
  createKeyedMutex,
  createSemaphore,
  type FifoLock,
  type Semaphore,
} from './semaphore.js';
export { createSignalWatchers, type SignalWatchers } from './signal-watchers.js';
export { StringDictionary } from './string-dictionary.js';
export { disableAllocationSitePretenuring } from './v8-tuning.js';
