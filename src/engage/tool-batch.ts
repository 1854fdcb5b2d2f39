import { estimateTokens, type ModelMessage, type ModelToolCall } from '../model/index.js';
import type {
  ExecuteToolCallOptions,
  ToolCallOutcome,
  ToolContext,
  ToolOutcomeSink,
} from '../tools/index.js';
import { createSemaphore } from '../util/index.js';
import type { LearnedEntry, StepMarker } from './context-window.js';
import type { RunState } from './run-state.js';
import type { RunSetup } from './setup.js';

/** What one turn's tool calls produced, with the calls tools made themselves (a sandboxed program's). */
export interface ToolBatchResult {
  outcomes: ToolCallOutcome[];
  /** Calls made from inside a tool during this turn: their ledger writes and skills count like the model's. */
  nested: ToolCallOutcome[];
}

type CallTool = NonNullable<ToolContext['callTool']>;

/**
 * Starts one tool call with the run's policy, hooks and approver, announcing its start; its outcome goes to
 * `sink` (never synchronously), which announces its end with `announceFinished`. Returns when it started.
 */
function invokeTool(
  state: RunState,
  setup: RunSetup,
  call: ModelToolCall,
  callTool: CallTool,
  sink: ToolOutcomeSink,
  slot: number,
): number {
  const { options, scope, logger, signal, clock, limits } = state;
  const { bus } = options;
  const { runId, agentId, workItemId, sessionKey } = scope;
  bus.publish(
    'run:tool-started',
    { runId, toolCallId: call.id, toolName: call.name, arguments: call.arguments },
    scope,
  );
  const startedAt = clock.now();
  // Plain literals with optional keys added after: spreading into a literal costs V8 a slow path per call.
  const context: ToolContext = {
    runId,
    agentId,
    workItemId,
    toolCallId: call.id,
    workspaceDir: options.workspaceDir,
    signal,
    bus,
    logger,
    callTool,
  };
  if (sessionKey !== undefined) context.sessionKey = sessionKey;
  const executeOptions: ExecuteToolCallOptions = {
    registry: setup.registry!,
    allowedNames: setup.allowedNames,
    maxResultChars: limits.maxToolResultChars,
    context,
  };
  // Nothing can abort a run without a caller signal: its calls need not check or race it.
  if (!state.abortable) executeOptions.abortSignal = null;
  if (options.policy) executeOptions.policy = options.policy;
  if (options.approve) executeOptions.approve = options.approve;
  if (options.hooks) executeOptions.hooks = options.hooks;
  state.trace.executeToolTo(call, executeOptions, sink, slot);
  return startedAt;
}

/** Publishes `run:tool-finished` for a call `invokeTool` started at `startedAt`. */
function announceFinished(
  state: RunState,
  call: ModelToolCall,
  outcome: ToolCallOutcome,
  startedAt: number,
): void {
  const { scope } = state;
  state.options.bus.publish(
    'run:tool-finished',
    {
      runId: scope.runId,
      toolCallId: call.id,
      toolName: call.name,
      isError: outcome.isError,
      result: outcome.content.length > 2000 ? `${outcome.content.slice(0, 2000)}…` : outcome.content,
      durationMs: state.clock.now() - startedAt,
    },
    scope,
  );
}

/**
 * The calls tools make themselves during one turn (`ToolContext.callTool`). Not through the semaphore: the
 * calling tool holds a slot and waits for these. A class with a bound method rather than a closure per
 * turn: its code is shared, and nothing has to name a new function every turn.
 */
class NestedCalls {
  readonly outcomes: ToolCallOutcome[] = [];
  readonly callTool: CallTool = this.call.bind(this);

  constructor(
    private readonly state: RunState,
    private readonly setup: RunSetup,
  ) {}

  private call(inner: ModelToolCall): Promise<ToolCallOutcome> {
    return new Promise((resolve, reject) => {
      const startedAt = invokeTool(
        this.state,
        this.setup,
        inner,
        this.callTool,
        {
          onOutcome: (outcome) => {
            announceFinished(this.state, inner, outcome, startedAt);
            this.outcomes.push(outcome);
            resolve(outcome);
          },
          onFailure: reject,
        },
        0,
      );
    });
  }
}

/** The answer to a call the run was aborted before it could start. */
function abortedBeforeStart(call: ModelToolCall): ToolCallOutcome {
  return {
    toolCallId: call.id,
    toolName: call.name,
    arguments: call.arguments,
    content: 'The run was aborted before this tool call started.',
    isError: true,
    status: 'aborted',
  };
}

/**
 * One turn's calls in flight: each outcome lands in its call's slot, and `done` resolves with all of them
 * in call order when the last one lands (or rejects with the first failure of the pipeline itself). One
 * promise per turn, where a promise per call and `Promise.all` cost four more reactions a call.
 */
class TurnCalls implements ToolOutcomeSink {
  readonly done: Promise<ToolBatchResult>;
  private readonly result: ToolBatchResult;
  private readonly startedAt: number[];
  private pending: number;
  private resolve!: (result: ToolBatchResult) => void;
  private reject!: (error: unknown) => void;

  constructor(
    private readonly state: RunState,
    private readonly setup: RunSetup,
    private readonly calls: ModelToolCall[],
    private readonly nested: NestedCalls,
  ) {
    this.result = { outcomes: new Array(calls.length), nested: nested.outcomes };
    this.startedAt = new Array(calls.length);
    this.pending = calls.length;
    this.done = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    if (calls.length === 0) this.resolve(this.result);
  }

  /** Starts the call in `slot`; its outcome comes to `sink`, which hands it on to `onOutcome`. */
  start(slot: number, sink: ToolOutcomeSink = this): void {
    const { state, setup, calls, nested } = this;
    this.startedAt[slot] = invokeTool(state, setup, calls[slot]!, nested.callTool, sink, slot);
  }

  onOutcome(outcome: ToolCallOutcome, slot: number): void {
    announceFinished(this.state, this.calls[slot]!, outcome, this.startedAt[slot]!);
    this.settle(outcome, slot);
  }

  onFailure(error: unknown): void {
    this.reject(error);
  }

  /** An outcome for `slot`, announced or not. */
  settle(outcome: ToolCallOutcome, slot: number): void {
    this.result.outcomes[slot] = outcome;
    if (--this.pending === 0) this.resolve(this.result);
  }
}

/** A call started under the semaphore: it gives its slot back once its outcome has landed. */
function runBounded(state: RunState, calls: TurnCalls, toolCalls: ModelToolCall[]): void {
  const semaphore = createSemaphore(state.limits.maxParallelTools);
  toolCalls.forEach((call, slot) => {
    // Waiting for a slot is cut short by the run's abort, if anything can abort it.
    semaphore.acquire(state.abortable ? state.signal : undefined).then(
      (release) => {
        try {
          calls.start(slot, {
            onOutcome(outcome) {
              calls.onOutcome(outcome, slot);
              release();
            },
            onFailure(error) {
              release();
              calls.onFailure(error);
            },
          });
        } catch (error) {
          release();
          calls.onFailure(error);
        }
      },
      // A call still waiting for a slot when the run is aborted does not start.
      () => calls.settle(abortedBeforeStart(call), slot),
    );
  });
}

/**
 * All tool calls of a turn, at most `maxParallelTools` at once, results in call order. Over budget, or
 * without tools, each call gets an error result instead of running.
 */
export function runToolBatch(
  state: RunState,
  setup: RunSetup,
  toolCalls: ModelToolCall[],
  budgetExceeded: boolean,
): Promise<ToolBatchResult> {
  if (budgetExceeded)
    return Promise.resolve({
      outcomes: toolCalls.map((call) => ({
        toolCallId: call.id,
        toolName: call.name,
        arguments: call.arguments,
        content: 'Not run: the run reached its token or cost budget.',
        isError: true,
        status: 'aborted' as const,
      })),
      nested: [],
    });
  if (!setup.registry)
    return Promise.resolve({
      outcomes: toolCalls.map((call) => ({
        toolCallId: call.id,
        toolName: call.name,
        arguments: call.arguments,
        content: `Unknown tool "${call.name}": no tools are available in this run.`,
        isError: true,
        status: 'unknown_tool' as const,
      })),
      nested: [],
    });
  const nested = new NestedCalls(state, setup);
  const calls = new TurnCalls(state, setup, toolCalls, nested);
  // A turn's calls are bounded by a semaphore of their own, made only when they do not all fit.
  if (toolCalls.length > state.limits.maxParallelTools) runBounded(state, calls, toolCalls);
  else
    for (let slot = 0; slot < toolCalls.length; slot++) {
      if (state.signal.aborted) calls.settle(abortedBeforeStart(toolCalls[slot]!), slot);
      else calls.start(slot);
    }
  return calls.done;
}

const noSteps: StepMarker[] = [];
const noLedgerWrite = { wroteLedger: false } as const;

/** What a turn's tool calls did besides answering: ledger writes and skill activations. */
interface TurnEffects {
  steps: StepMarker[];
  learned: LearnedEntry[];
  wroteLedger: boolean;
  skillsChanged: boolean;
}

function takeEffects(outcome: ToolCallOutcome, window: RunSetup['window'], effects: TurnEffects): void {
  const metadata = outcome.metadata;
  if (!metadata) return;
  const entry = metadata.ledgerEntry;
  if (entry) {
    effects.wroteLedger = true;
    if (entry.entryType === 'step') effects.steps.push({ seq: entry.seq, content: entry.content });
    if (entry.entryType === 'finding' || entry.entryType === 'decision')
      effects.learned.push({ seq: entry.seq, entryType: entry.entryType, content: entry.content });
  }
  const skill = metadata.activatedSkill;
  if (skill) {
    window.setSkill(skill.name, skill.body);
    effects.skillsChanged = true;
  }
}

/**
 * Adds the turn (assistant message and tool results) to the transcript and the context window: ledger
 * steps close blocks, findings and decisions are kept, activated skills join the prompt. Returns whether
 * the turn wrote the ledger.
 */
export function recordToolResults(
  state: RunState,
  setup: RunSetup,
  assistant: ModelMessage,
  batch: ToolBatchResult,
): { wroteLedger: boolean } {
  const { options, scope, contextOptions } = state;
  const { window } = setup;
  // The turn as the context window takes it: the assistant message, then one result per call in call order.
  const turnMessages: ModelMessage[] = [assistant];
  for (const outcome of batch.outcomes) {
    const message: Extract<ModelMessage, { role: 'tool' }> = {
      role: 'tool',
      toolCallId: outcome.toolCallId,
      toolName: outcome.toolName,
      content: outcome.content,
    };
    if (outcome.isError) message.isError = true;
    turnMessages.push(message);
    state.newMessages.push(message);
  }

  // Most turns' calls carry no metadata (no ledger write, no skill): they need no effects to be gathered.
  let withEffects = batch.nested.length > 0;
  for (const outcome of batch.outcomes) if (outcome.metadata) withEffects = true;
  if (!withEffects) {
    window.appendTurn(turnMessages, noSteps);
    return noLedgerWrite;
  }
  const effects: TurnEffects = { steps: [], learned: [], wroteLedger: false, skillsChanged: false };
  for (const outcome of batch.outcomes) takeEffects(outcome, window, effects);
  for (const outcome of batch.nested) takeEffects(outcome, window, effects);
  const { steps, learned, wroteLedger, skillsChanged } = effects;
  if (skillsChanged) state.activeSkills = window.activeSkills();
  steps.sort((left, right) => left.seq - right.seq);
  const beforeClose = steps.length ? window.measure() : undefined;
  learned.sort((left, right) => left.seq - right.seq);
  if (window.appendTurn(turnMessages, steps, learned) && contextOptions.truncateClosedBlocks) {
    state.compactions++;
    const after = window.measure();
    options.bus.publish(
      'engage:compacted',
      {
        runId: scope.runId,
        trigger: 'step',
        // Measured as if the closing turn had been appended without truncation.
        tokensBefore: beforeClose!.tokens + estimateTokens(turnMessages),
        tokensAfter: after.tokens,
        messagesBefore: beforeClose!.messages + turnMessages.length,
        messagesAfter: after.messages,
        ledgerEntriesUsed: steps.length,
      },
      scope,
    );
  }
  return { wroteLedger };
}
