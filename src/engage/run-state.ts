import type { RunStatus } from '../bus/index.js';
import type { ModelMessage } from '../model/index.js';
import {
  type Clock,
  ErrorCodes,
  type Logger,
  silentLogger,
  systemClock,
  UserInputError,
} from '../util/index.js';
import { type RunTrace, untracedRun } from './tracing.js';
import type { EngageOptions, EngageResult, EngageUsage } from './types.js';

const limitDefaults = {
  maxTurns: 50,
  maxParallelTools: 8,
  maxToolResultChars: 50_000,
};

const contextDefaults = {
  compactThreshold: 0.7,
  compactKeepRecent: 10,
  ledgerNudgeInterval: 5,
  truncateClosedBlocks: true,
  minLedgerEntries: 3,
};

/** The bus scope of every event of the run. */
export interface RunScope {
  runId: string;
  agentId: string;
  workItemId: string;
  sessionKey?: string;
}

/**
 * One run's state: its settings with defaults applied, its abort signal, and what it has produced so far.
 * The steps (turn, tool batch, finish) read and update this object; nothing else is shared between them.
 */
export interface RunState {
  readonly options: EngageOptions;
  /** The run's spans (a no-op trace when the process is not traced). */
  readonly trace: RunTrace;
  readonly scope: RunScope;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly limits: RunSettings['limits'];
  readonly contextOptions: RunSettings['contextOptions'];
  /** Aborts with the caller's signal (and only with it). */
  readonly signal: AbortSignal;
  /** Stops following the caller's signal; done when the run finishes. */
  readonly detach: () => void;
  readonly usage: EngageUsage;
  /** Assistant and tool messages of the run, uncompacted, in order. */
  readonly newMessages: ModelMessage[];
  turns: number;
  /** The assistant text of the last model turn. */
  lastText: string;
  compactions: number;
  activeSkills: string[];
}

function assertPositiveInteger(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `${name} must be a positive integer, got ${value}.`,
    });
  }
}

function stripUndefined<T extends object>(value: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  const defined: Record<string, unknown> = {};
  for (const key in value) if (value[key] !== undefined) defined[key] = value[key];
  return defined as { [K in keyof T]: Exclude<T[K], undefined> };
}

/** The limits and context options with their defaults. */
function resolveSettings(options: EngageOptions) {
  return {
    limits: { ...limitDefaults, ...stripUndefined(options.limits ?? {}) },
    contextOptions: { ...contextDefaults, ...stripUndefined(options.context ?? {}) },
  };
}

type RunSettings = ReturnType<typeof resolveSettings>;

/** Checks the options (throwing `INVALID_REQUEST` for bad limits) and sets up the run's state. */
export function createRunState(options: EngageOptions, trace: RunTrace = untracedRun): RunState {
  const { workItemId } = options;
  const { runId, agentId, sessionKey } = options.scope;
  const { limits, contextOptions } = resolveSettings(options);
  assertPositiveInteger('limits.maxTurns', limits.maxTurns);
  assertPositiveInteger('limits.maxParallelTools', limits.maxParallelTools);
  if (limits.costBudgetUsd !== undefined && !options.pricing) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: 'limits.costBudgetUsd needs pricing to be set.',
    });
  }
  if (!(contextOptions.compactThreshold > 0 && contextOptions.compactThreshold <= 1)) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: 'context.compactThreshold must be in (0, 1].',
    });
  }

  const controller = new AbortController();
  const onOuterAbort = () => controller.abort(options.signal!.reason);
  if (options.signal?.aborted) controller.abort(options.signal.reason);
  else options.signal?.addEventListener('abort', onOuterAbort, { once: true });

  return {
    options,
    trace,
    scope: { runId, agentId, workItemId, ...(sessionKey !== undefined ? { sessionKey } : {}) },
    logger: (options.logger ?? silentLogger).child({ runId, agentId, workItemId }),
    clock: options.clock ?? systemClock,
    limits,
    contextOptions,
    signal: controller.signal,
    detach: () => options.signal?.removeEventListener('abort', onOuterAbort),
    usage: { inputTokens: 0, outputTokens: 0 },
    newMessages: [],
    turns: 0,
    lastText: '',
    compactions: 0,
    activeSkills: [],
  };
}

export function addUsage(state: RunState, inputTokens: number, outputTokens: number): void {
  const { usage } = state;
  const { pricing } = state.options;
  usage.inputTokens += inputTokens;
  usage.outputTokens += outputTokens;
  if (pricing) {
    usage.costUsd =
      (usage.inputTokens * pricing.inputUsdPerMTok + usage.outputTokens * pricing.outputUsdPerMTok) / 1e6;
  }
}

export function overBudget(state: RunState): boolean {
  const { limits, usage } = state;
  return (
    (limits.tokenBudget !== undefined && usage.inputTokens + usage.outputTokens > limits.tokenBudget) ||
    (limits.costBudgetUsd !== undefined && (usage.costUsd ?? 0) > limits.costBudgetUsd)
  );
}

/** The result as the caller gets it (and as `beforeFinish` sees it). */
export function resultOf(state: RunState, status: RunStatus, error?: EngageResult['error']): EngageResult {
  return {
    status,
    text: state.lastText,
    newMessages: state.newMessages,
    usage: state.usage,
    turns: state.turns,
    activeSkills: state.activeSkills,
    compactions: state.compactions,
    ...(error ? { error } : {}),
  };
}
