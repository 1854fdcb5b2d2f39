export {
  type AwarenessLedgerReader,
  type BuildAwarenessDigestOptions,
  buildAwarenessDigest,
} from './awareness.js';
export {
  type BlockedLedgerWriter,
  blockedReason,
  blockWorkItem,
  createReportBlockedTool,
  unblockWorkItem,
} from './blocked.js';
export {
  type ChildWorkLedgerReader,
  type CreateChildWorkToolsOptions,
  createChildWorkTools,
} from './child-work.js';
export {
  type AwarenessConfig,
  awarenessConfigSchema,
  defaultSystemWorkKinds,
  memoryMaintenanceKind,
  type WorkClass,
  type WorkConfig,
  workClasses,
  workClassFilter,
  workConfigSchema,
} from './config.js';
export type { WorkErrorPayload, WorkEventBase } from './events.js';
export {
  type CreateWorkQueueOptions,
  createWorkQueue,
  type DeletedWorkItems,
  type DeleteEndedStep,
  type EndedLane,
  type WorkCompletion,
  type WorkQueue,
} from './queue.js';
export { createWorkRetention, type WorkRetention, type WorkRetentionOptions } from './retention.js';
export { outcomeSummary } from './rows.js';
export {
  canTransition,
  isTerminalWorkState,
  itemMovedOn,
  liveWorkStates,
  terminalWorkStates,
  WorkErrorCodes,
  type WorkState,
  workStates,
} from './states.js';
export {
  type ClaimFilter,
  type SubmitResult,
  type WorkItem,
  type WorkListFilter,
  type WorkOutcome,
  type WorkSubmission,
  workSubmissionSchema,
} from './types.js';
