import type { RunStatus } from '../bus/index.js';
import type { ModelMessage } from '../model/index.js';
import {
  type AbortSource,
  addAbortListener,
  type Clock,
  ErrorCodes,
  type Logger,
  removeAbortListener,
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
  /**
   * The run's own signal, for what may leave listeners on it (tools, hook scripts, waits for a tool slot):
   * it aborts with the caller's signal (and only with it), and the caller's, which may outlive the run, is
   * kept free of them. Made when first read, since a chat turn runs no tool: in Node 20 making it and
   * following the caller's cost about 6 µs a run, and about 400 bytes of each signal reach the old
   * generation (docs/decisions/0025-fewer-abort-signals.md). A run without a caller's signal never aborts.
   */
  readonly signal: AbortSignal;
  /**
   * The caller's signal, if any; a model call follows it directly (a call takes one listener per signal). A
   * LazyAbortController (a chat turn's) is followed without making its signal.
   */
  readonly callerSignal: AbortSource | undefined;
  /** Whether the caller's signal has aborted: checked between steps without making the run's own signal. */
  aborted(): boolean;
  /** Whether anything can abort the run: it follows a caller's signal. */
  readonly abortable: boolean;
  /** Stops following the caller's signal; done when the run finishes. */
  detach(): void;
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

/** `defaults` with the caller's defined values over them (a copy, then assignments: no merging spread). */
function withDefaults<D extends object, O extends object>(
  defaults: D,
  given: O | undefined,
): D & { [K in keyof O]: Exclude<O[K], undefined> } {
  const merged = { ...defaults } as Record<string, unknown>;
  if (given) for (const key in given) if (given[key] !== undefined) merged[key] = given[key];
  return merged as D & { [K in keyof O]: Exclude<O[K], undefined> };
}

/** The limits and context options with their defaults. */
function resolveSettings(options: EngageOptions) {
  return {
    limits: withDefaults(limitDefaults, options.limits),
    contextOptions: withDefaults(contextDefaults, options.context),
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

  const scope: RunScope = { runId, agentId, workItemId };
  if (sessionKey !== undefined) scope.sessionKey = sessionKey;
  return new EngageRunState(options, trace, scope, limits, contextOptions);
}

/**
 * A class, not an object literal: a literal with a getter, made per run, kept its getter's closure and all
 * that closure reaches (here the whole run) alive through every young-generation collection until the next
 * full one, so each run's objects were promoted (docs/decisions/0026-no-per-call-getter-literals.md). A
 * getter on the prototype costs nothing of the kind.
 */
class EngageRunState implements RunState {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly callerSignal: AbortSource | undefined;
  readonly abortable: boolean;
  readonly usage: EngageUsage = { inputTokens: 0, outputTokens: 0 };
  readonly newMessages: ModelMessage[] = [];
  turns = 0;
  lastText = '';
  compactions = 0;
  activeSkills: string[] = [];
  private own: AbortController | undefined = undefined;
  private detached = false;
  /** Whether the caller's signal had aborted when the run stopped following it. */
  private abortedWhenDetached = false;
  private onOuterAbort: (() => void) | undefined = undefined;

  constructor(
    readonly options: EngageOptions,
    readonly trace: RunTrace,
    readonly scope: RunScope,
    readonly limits: RunSettings['limits'],
    readonly contextOptions: RunSettings['contextOptions'],
  ) {
    this.logger = (options.logger ?? silentLogger).child({
      runId: scope.runId,
      agentId: scope.agentId,
      workItemId: scope.workItemId,
    });
    this.clock = options.clock ?? systemClock;
    this.callerSignal = options.signal;
    this.abortable = options.signal !== undefined;
  }

  get signal(): AbortSignal {
    if (this.own) return this.own.signal;
    const own = new AbortController();
    this.own = own;
    const outer = this.callerSignal;
    if (this.detached ? this.abortedWhenDetached : outer?.aborted) own.abort(outer!.reason);
    else if (outer && !this.detached) {
      this.onOuterAbort = () => own.abort(outer.reason);
      addAbortListener(outer, this.onOuterAbort);
    }
    return own.signal;
  }

  aborted(): boolean {
    return this.detached ? this.abortedWhenDetached : this.callerSignal?.aborted === true;
  }

  detach(): void {
    if (this.detached) return;
    this.detached = true;
    this.abortedWhenDetached = this.callerSignal?.aborted === true;
    if (this.onOuterAbort) removeAbortListener(this.callerSignal!, this.onOuterAbort);
    this.onOuterAbort = undefined;
  }
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
