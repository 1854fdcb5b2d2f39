import type { Bus, RunStatus } from '../bus/index.js';
import type { Ledger } from '../ledger/index.js';
import type { LanguageModel, ModelMessage, ModelRetryOptions } from '../model/index.js';
import type { SkillLibrary } from '../skills/index.js';
import type { HookPipeline, Policy, ToolApprover, ToolRegistry } from '../tools/index.js';
import type { AbortSource, Clock, Logger } from '../util/index.js';

export interface EngageLimits {
  /** Model calls per run. Reaching it ends the run with status `max_turns`. Default 50. */
  maxTurns?: number;
  /** Tool calls of one turn that run at once; 1 runs them one after another. Default 8. */
  maxParallelTools?: number;
  /** Input + output tokens over all model calls of the run. */
  tokenBudget?: number;
  /** Needs `pricing`. */
  costBudgetUsd?: number;
  /** Longest tool result passed to the model. Default 50,000 characters. */
  maxToolResultChars?: number;
}

export interface EngageContextOptions {
  /** Fraction of the model's context window above which the context is compacted. Default 0.7. */
  compactThreshold?: number;
  /** Messages kept verbatim by ledger compaction. Default 10. */
  compactKeepRecent?: number;
  /** Turns without a ledger write before a reminder; 0 turns the nudge off. Default 5. */
  ledgerNudgeInterval?: number;
  /** Replace closed blocks by their summaries. Default true. */
  truncateClosedBlocks?: boolean;
  /** Fewer ledger entries than this make threshold compaction fall back to summarisation. Default 3. */
  minLedgerEntries?: number;
  /** Orientation for this work (awareness digest, work item description); kept in the system prompt. */
  orient?: string;
}

export interface EngageOptions {
  model: LanguageModel;
  /** Leading system message(s), then the conversation so far, ending with the new user message. */
  messages: ModelMessage[];
  tools?: {
    registry: ToolRegistry;
    /** Tools offered to the model; all registered tools when omitted. */
    names?: Iterable<string>;
  };
  /** Root of the agent's workspace; file tools are confined to it. */
  workspaceDir: string;
  policy?: Policy;
  /** Decides the calls the policy marks `ask` (an editor session's user); refused without one. */
  approve?: ToolApprover;
  hooks?: HookPipeline;
  /** Needed for ledger compaction and the nudge; also where run failures are recorded. */
  ledger?: Ledger;
  skills?: {
    library: SkillLibrary;
    /** Put the catalog (names and descriptions) in the system prompt. Default true. */
    catalog?: boolean;
    /** Activate skills whose trigger keywords occur in the new user message. Default true. */
    autoActivate?: boolean;
    maxAutoActivated?: number;
    maxSkillPromptTokens?: number;
  };
  /** Every run has one; chat sessions get an implicit work item from the caller. */
  workItemId: string;
  scope: { runId: string; agentId: string; sessionKey?: string };
  bus: Bus;
  /**
   * Aborts the run. A LazyAbortController (util) is followed without making its AbortSignal unless a
   * provider, hook or tool of the run asks for one: a chat turn passes one.
   */
  signal?: AbortSource;
  limits?: EngageLimits;
  context?: EngageContextOptions;
  /** Appended to the system prompt (kept through compaction). */
  systemPromptExtras?: string[];
  modelCallOptions?: {
    timeoutMs?: number;
    retry?: ModelRetryOptions;
    maxTokens?: number;
    temperature?: number;
  };
  /** Prices per million tokens, for `usage.costUsd` and `costBudgetUsd`. */
  pricing?: { inputUsdPerMTok: number; outputUsdPerMTok: number };
  /**
   * Runs after the loop ends and before `run:finished` is published, e.g. to persist the transcript so a
   * client that sees the final event can rely on it. If it throws, the run ends with status `error`.
   */
  beforeFinish?: (result: EngageResult) => Promise<void>;
  logger?: Logger;
  clock?: Clock;
}

export interface EngageUsage {
  inputTokens: number;
  outputTokens: number;
  costUsd?: number;
}

export interface EngageResult {
  status: RunStatus;
  /** The assistant text of the last model turn. */
  text: string;
  /** Assistant and tool messages the run produced, uncompacted, in order: the transcript to persist. */
  newMessages: ModelMessage[];
  usage: EngageUsage;
  /** Model calls made (summarisation calls excluded). */
  turns: number;
  error?: { code: string; message: string; retryable: boolean };
  /** Skills active at the end of the run. */
  activeSkills: string[];
  compactions: number;
}

/** Codes of runs that stop cleanly (their status says why) but still carry an explanation. */
export const EngageErrorCodes = {
  maxTurns: 'MAX_TURNS',
  hookBlocked: 'HOOK_BLOCKED',
  budgetExceeded: 'BUDGET_EXCEEDED',
} as const;
