import './events.js';
import type { Bus, RunStatus } from '../bus/index.js';
import type { Ledger } from '../ledger/index.js';
import {
  estimateTokens,
  type LanguageModel,
  type ModelMessage,
  type ModelRetryOptions,
  type ModelStreamError,
  type ModelToolCall,
  type StreamModelOptions,
  streamModel,
} from '../model/index.js';
import type { SkillLibrary } from '../skills/index.js';
import {
  executeToolCall,
  type HookPipeline,
  type Policy,
  type ToolApprover,
  type ToolCallOutcome,
  type ToolRegistry,
} from '../tools/index.js';
import {
  type Clock,
  coerceError,
  createSemaphore,
  ErrorCodes,
  type Logger,
  silentLogger,
  systemClock,
  UserInputError,
} from '../util/index.js';
import { compactIfNeeded } from './compaction.js';
import { createContextWindow, type LearnedEntry, type StepMarker } from './context-window.js';

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
  /** Replace closed blocks by their step stubs. Default true. */
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
  signal?: AbortSignal;
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

/** Codes of runs that stop cleanly (their status says why) but still carry an explanation. */
export const EngageErrorCodes = {
  maxTurns: 'MAX_TURNS',
  hookBlocked: 'HOOK_BLOCKED',
  budgetExceeded: 'BUDGET_EXCEEDED',
} as const;

const nudgeText = (turns: number) =>
  `[agentd] ${turns} turns have passed without a ledger entry. Record your plan, findings and decisions with ` +
  'ledger_append, and write a `step` entry when you finish a step: your context is compacted from the ledger.';

function assertPositiveInteger(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `${name} must be a positive integer, got ${value}.`,
    });
  }
}

/**
 * The agent loop: model call → all tool calls of the turn in parallel (bounded), results in call order →
 * next call, until the model ends its turn or a limit, a hook, an abort or a provider error stops the run.
 * Never throws for run failures: the outcome is in `status`; `run:*` events are published throughout.
 */
export async function runEngage(options: EngageOptions): Promise<EngageResult> {
  const { model, bus, workItemId } = options;
  const clock = options.clock ?? systemClock;
  const { runId, agentId, sessionKey } = options.scope;
  const scope = { runId, agentId, workItemId, ...(sessionKey !== undefined ? { sessionKey } : {}) };
  const logger = (options.logger ?? silentLogger).child({ runId, agentId, workItemId });
  const limits = { ...limitDefaults, ...stripUndefined(options.limits ?? {}) };
  const contextOptions = { ...contextDefaults, ...stripUndefined(options.context ?? {}) };
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
  const signal = controller.signal;

  const usage: EngageUsage = { inputTokens: 0, outputTokens: 0 };
  const addUsage = (inputTokens: number, outputTokens: number) => {
    usage.inputTokens += inputTokens;
    usage.outputTokens += outputTokens;
    if (options.pricing) {
      usage.costUsd =
        (usage.inputTokens * options.pricing.inputUsdPerMTok +
          usage.outputTokens * options.pricing.outputUsdPerMTok) /
        1e6;
    }
  };
  const overBudget = () =>
    (limits.tokenBudget !== undefined && usage.inputTokens + usage.outputTokens > limits.tokenBudget) ||
    (limits.costBudgetUsd !== undefined && (usage.costUsd ?? 0) > limits.costBudgetUsd);

  const newMessages: ModelMessage[] = [];
  let turns = 0;
  let lastText = '';
  let compactions = 0;
  let activeSkills: string[] = [];

  bus.publish(
    'run:started',
    {
      runId,
      agentId,
      workItemId,
      model: `${model.provider}/${model.modelId}`,
      ...(sessionKey !== undefined ? { sessionKey } : {}),
    },
    scope,
  );

  // beforeFinish sees the result the caller will get, unless beforeFinish itself fails the run.
  const resultOf = (status: RunStatus, error?: EngageResult['error']): EngageResult => ({
    status,
    text: lastText,
    newMessages,
    usage,
    turns,
    activeSkills,
    compactions,
    ...(error ? { error } : {}),
  });

  const finish = async (status: RunStatus, error?: EngageResult['error']): Promise<EngageResult> => {
    options.signal?.removeEventListener('abort', onOuterAbort);
    if (options.beforeFinish) {
      try {
        await options.beforeFinish(resultOf(status, error));
      } catch (caught) {
        const coerced = coerceError(caught);
        logger.error({ err: caught }, 'beforeFinish failed; the run is reported as failed');
        status = 'error';
        error = { code: coerced.code, message: coerced.message, retryable: coerced.retryable };
      }
    }
    bus.publish(
      'run:finished',
      { runId, status, text: lastText, usage: { ...usage }, turns, ...(error ? { error } : {}) },
      scope,
    );
    return resultOf(status, error);
  };

  try {
    let leading = 0;
    while (leading < options.messages.length && options.messages[leading]!.role === 'system') leading++;
    const system = options.messages
      .slice(0, leading)
      .map((message) => message.content)
      .join('\n\n');
    const history = options.messages.slice(leading);
    const extras = [...(options.systemPromptExtras ?? [])];
    if (contextOptions.orient) extras.push(`== ORIENT ==\n${contextOptions.orient}`);

    const registry = options.tools?.registry;
    const allowedNames = registry
      ? new Set(options.tools?.names ?? registry.list().map((tool) => tool.name))
      : new Set<string>();
    const modelTools = registry ? registry.toModelTools(allowedNames) : [];
    const overheadTokens = modelTools.length ? estimateTokens(JSON.stringify(modelTools)) : 0;
    const canWriteLedger = allowedNames.has('ledger_append') && options.ledger !== undefined;

    const skills = options.skills;
    if (skills && skills.catalog !== false) {
      const catalog = await skills.library.catalog();
      if (catalog) extras.push(catalog);
    }
    const window = createContextWindow({
      system,
      systemExtras: extras,
      history,
      truncateClosedBlocks: contextOptions.truncateClosedBlocks,
    });
    if (skills && skills.autoActivate !== false) {
      const task = window.taskMessage();
      if (task) {
        const activated = await skills.library.autoActivate(task.content, {
          runId,
          agentId,
          workItemId,
          ...(skills.maxAutoActivated !== undefined ? { maxSkills: skills.maxAutoActivated } : {}),
          ...(skills.maxSkillPromptTokens !== undefined ? { maxTokens: skills.maxSkillPromptTokens } : {}),
        });
        for (const skill of activated) window.setSkill(skill.name, skill.body);
      }
    }
    activeSkills = window.activeSkills();

    const maxContextTokens = Math.floor(model.contextWindowTokens * contextOptions.compactThreshold);
    const streamOptions: StreamModelOptions = {
      signal,
      logger,
      ...(options.modelCallOptions?.timeoutMs !== undefined
        ? { timeoutMs: options.modelCallOptions.timeoutMs }
        : {}),
      ...(options.modelCallOptions?.retry ? { retry: options.modelCallOptions.retry } : {}),
    };
    const semaphore = createSemaphore(limits.maxParallelTools);
    let turnsWithoutLedgerWrite = 0;

    // Calls made from inside a tool (a sandboxed program) during the current turn: their ledger writes and
    // skill activations count like the model's own calls.
    let nestedOutcomes: ToolCallOutcome[] = [];

    const invokeTool = async (call: ModelToolCall): Promise<ToolCallOutcome> => {
      bus.publish(
        'run:tool-started',
        { runId, toolCallId: call.id, toolName: call.name, arguments: call.arguments },
        scope,
      );
      const startedAt = clock.now();
      const outcome = await executeToolCall(call, {
        registry: registry!,
        allowedNames,
        ...(options.policy ? { policy: options.policy } : {}),
        ...(options.approve ? { approve: options.approve } : {}),
        ...(options.hooks ? { hooks: options.hooks } : {}),
        maxResultChars: limits.maxToolResultChars,
        context: {
          runId,
          agentId,
          workItemId,
          ...(sessionKey !== undefined ? { sessionKey } : {}),
          toolCallId: call.id,
          workspaceDir: options.workspaceDir,
          signal,
          bus,
          logger,
          // Not through the semaphore: the calling tool holds a slot and waits for these.
          callTool: async (inner) => {
            const nested = await invokeTool(inner);
            nestedOutcomes.push(nested);
            return nested;
          },
        },
      });
      bus.publish(
        'run:tool-finished',
        {
          runId,
          toolCallId: call.id,
          toolName: call.name,
          isError: outcome.isError,
          result: outcome.content.length > 2000 ? `${outcome.content.slice(0, 2000)}…` : outcome.content,
          durationMs: clock.now() - startedAt,
        },
        scope,
      );
      return outcome;
    };

    const runTool = async (call: ModelToolCall): Promise<ToolCallOutcome> => {
      let release: () => void;
      try {
        release = await semaphore.acquire(signal);
      } catch {
        return {
          toolCallId: call.id,
          toolName: call.name,
          arguments: call.arguments,
          content: 'The run was aborted before this tool call started.',
          isError: true,
          status: 'aborted',
        };
      }
      try {
        return await invokeTool(call);
      } finally {
        release();
      }
    };

    for (let turn = 1; turn <= limits.maxTurns; turn++) {
      if (signal.aborted) return finish('aborted', abortedError());

      const compaction = await compactIfNeeded({
        window,
        maxTokens: maxContextTokens,
        overheadTokens,
        keepRecent: contextOptions.compactKeepRecent,
        minLedgerEntries: contextOptions.minLedgerEntries,
        ledger: options.ledger,
        workItemId,
        model,
        modelCallOptions: streamOptions,
        logger,
      });
      if (compaction) {
        compactions++;
        addUsage(compaction.usage.inputTokens, compaction.usage.outputTokens);
        const { usage: _usage, ...event } = compaction;
        bus.publish('engage:compacted', { runId, ...event }, scope);
        if (signal.aborted) return finish('aborted', abortedError());
      }

      let requestMessages = window.render();
      if (options.hooks) {
        const outcome = await options.hooks.run(
          'before_llm_call',
          {
            runId,
            agentId,
            workItemId,
            ...(sessionKey !== undefined ? { sessionKey } : {}),
            turn,
            model: `${model.provider}/${model.modelId}`,
            messages: requestMessages,
            toolNames: modelTools.map((tool) => tool.name),
          },
          { signal },
        );
        if (outcome.action === 'block') {
          return finish('blocked', {
            code: EngageErrorCodes.hookBlocked,
            message: `Blocked by hook ${outcome.hook}: ${outcome.reason}`,
            retryable: false,
          });
        }
        requestMessages = outcome.payload.messages;
      }

      turns = turn;
      let text = '';
      const toolCalls: ModelToolCall[] = [];
      let streamError: ModelStreamError | undefined;
      for await (const event of streamModel(
        model,
        {
          messages: requestMessages,
          ...(modelTools.length ? { tools: modelTools } : {}),
          ...(options.modelCallOptions?.maxTokens !== undefined
            ? { maxTokens: options.modelCallOptions.maxTokens }
            : {}),
          ...(options.modelCallOptions?.temperature !== undefined
            ? { temperature: options.modelCallOptions.temperature }
            : {}),
        },
        streamOptions,
      )) {
        if (event.type === 'text-delta') {
          text += event.text;
          bus.publish('run:text-delta', { runId, delta: event.text, text }, scope);
        } else if (event.type === 'tool-call') toolCalls.push(event.toolCall);
        else if (event.type === 'usage') addUsage(event.usage.inputTokens, event.usage.outputTokens);
        else if (event.type === 'error') streamError = event.error;
      }
      lastText = text;

      if (streamError) {
        // Partial text stays in the transcript; partial tool calls cannot (they would have no results).
        if (text !== '') newMessages.push({ role: 'assistant', content: text });
        if (streamError.code === ErrorCodes.aborted || signal.aborted)
          return finish('aborted', abortedError());
        if (options.hooks) {
          await options.hooks.run('on_error', {
            runId,
            agentId,
            workItemId,
            where: 'model',
            error: { code: streamError.code, message: streamError.message },
          });
        }
        await recordInLedger(
          options.ledger,
          workItemId,
          'error',
          `run ${runId} failed on a model call: ${streamError.code}: ${streamError.message}`,
          logger,
        );
        return finish('error', {
          code: streamError.code,
          message: streamError.message,
          retryable: streamError.retryable,
        });
      }

      const assistant: ModelMessage = toolCalls.length
        ? { role: 'assistant', content: text, toolCalls }
        : { role: 'assistant', content: text };
      newMessages.push(assistant);
      if (toolCalls.length === 0) {
        window.appendTurn([assistant], []);
        return finish('completed');
      }

      const budgetExceeded = overBudget();
      nestedOutcomes = [];
      const outcomes: ToolCallOutcome[] = budgetExceeded
        ? toolCalls.map((call) => ({
            toolCallId: call.id,
            toolName: call.name,
            arguments: call.arguments,
            content: 'Not run: the run reached its token or cost budget.',
            isError: true,
            status: 'aborted' as const,
          }))
        : registry
          ? await Promise.all(toolCalls.map(runTool))
          : toolCalls.map((call) => ({
              toolCallId: call.id,
              toolName: call.name,
              arguments: call.arguments,
              content: `Unknown tool "${call.name}": no tools are available in this run.`,
              isError: true,
              status: 'unknown_tool' as const,
            }));

      const toolMessages: ModelMessage[] = outcomes.map((outcome) => ({
        role: 'tool',
        toolCallId: outcome.toolCallId,
        toolName: outcome.toolName,
        content: outcome.content,
        ...(outcome.isError ? { isError: true } : {}),
      }));
      newMessages.push(...toolMessages);

      const steps: StepMarker[] = [];
      const learned: LearnedEntry[] = [];
      let wroteLedger = false;
      for (const outcome of [...outcomes, ...nestedOutcomes]) {
        const entry = outcome.metadata?.ledgerEntry;
        if (entry) {
          wroteLedger = true;
          if (entry.entryType === 'step') steps.push({ seq: entry.seq, content: entry.content });
          if (entry.entryType === 'finding' || entry.entryType === 'decision')
            learned.push({ seq: entry.seq, entryType: entry.entryType, content: entry.content });
        }
        const skill = outcome.metadata?.activatedSkill;
        if (skill) window.setSkill(skill.name, skill.body);
      }
      activeSkills = window.activeSkills();
      steps.sort((left, right) => left.seq - right.seq);
      const tokensBeforeClose = steps.length ? estimateTokens(window.render()) : 0;
      const messagesBeforeClose = steps.length ? window.render().length : 0;
      learned.sort((left, right) => left.seq - right.seq);
      if (
        window.appendTurn([assistant, ...toolMessages], steps, learned) &&
        contextOptions.truncateClosedBlocks
      ) {
        compactions++;
        const after = window.render();
        bus.publish(
          'engage:compacted',
          {
            runId,
            trigger: 'step',
            // Measured as if the closing turn had been appended without truncation.
            tokensBefore: tokensBeforeClose + estimateTokens([assistant, ...toolMessages]),
            tokensAfter: estimateTokens(after),
            messagesBefore: messagesBeforeClose + 1 + toolMessages.length,
            messagesAfter: after.length,
            ledgerEntriesUsed: steps.length,
          },
          scope,
        );
      }

      if (budgetExceeded) {
        const message = `The run used ${usage.inputTokens + usage.outputTokens} tokens${usage.costUsd !== undefined ? ` ($${usage.costUsd.toFixed(4)})` : ''}, over its budget.`;
        await recordInLedger(options.ledger, workItemId, 'note', `run ${runId} stopped: ${message}`, logger);
        return finish('budget_exceeded', {
          code: EngageErrorCodes.budgetExceeded,
          message,
          retryable: false,
        });
      }
      if (signal.aborted) return finish('aborted', abortedError());

      turnsWithoutLedgerWrite = wroteLedger ? 0 : turnsWithoutLedgerWrite + 1;
      if (
        canWriteLedger &&
        contextOptions.ledgerNudgeInterval > 0 &&
        turnsWithoutLedgerWrite >= contextOptions.ledgerNudgeInterval
      ) {
        window.appendNote(nudgeText(turnsWithoutLedgerWrite));
        bus.publish('engage:nudged', { runId, turnsWithoutLedgerWrite }, scope);
        turnsWithoutLedgerWrite = 0;
      }
    }

    const message = `The run stopped after ${limits.maxTurns} turns without finishing.`;
    await recordInLedger(options.ledger, workItemId, 'note', `run ${runId}: ${message}`, logger);
    return finish('max_turns', { code: EngageErrorCodes.maxTurns, message, retryable: false });
  } catch (error) {
    if (signal.aborted) return finish('aborted', abortedError());
    const coerced = coerceError(error);
    logger.error({ err: error }, 'engage loop failed');
    return finish('error', { code: coerced.code, message: coerced.message, retryable: coerced.retryable });
  }
}

function abortedError(): EngageResult['error'] {
  return { code: ErrorCodes.aborted, message: 'The run was aborted.', retryable: false };
}

/** Best effort: a run's failure is worth keeping for a retry, but never worth failing the run over. */
async function recordInLedger(
  ledger: Ledger | undefined,
  workItemId: string,
  entryType: 'error' | 'note',
  content: string,
  logger: Logger,
) {
  if (!ledger) return;
  try {
    await ledger.append(workItemId, { entryType, content });
  } catch (error) {
    logger.warn({ err: error }, 'could not record the run outcome in the ledger');
  }
}

function stripUndefined<T extends object>(value: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, inner]) => inner !== undefined)) as {
    [K in keyof T]: Exclude<T[K], undefined>;
  };
}
