import { estimateTokens, type ModelMessage, type ModelToolCall } from '../model/index.js';
import type { ToolCallOutcome } from '../tools/index.js';
import type { LearnedEntry, StepMarker } from './context-window.js';
import type { RunState } from './run-state.js';
import type { RunSetup } from './setup.js';
import { executeTracedToolCall } from './tracing.js';

/** What one turn's tool calls produced, with the calls tools made themselves (a sandboxed program's). */
export interface ToolBatchResult {
  outcomes: ToolCallOutcome[];
  /** Calls made from inside a tool during this turn: their ledger writes and skills count like the model's. */
  nested: ToolCallOutcome[];
}

/** Runs one tool call with the run's policy, hooks and approver, announcing its start and end. */
async function invokeTool(
  state: RunState,
  setup: RunSetup,
  call: ModelToolCall,
  nested: ToolCallOutcome[],
): Promise<ToolCallOutcome> {
  const { options, scope, logger, signal, clock, limits } = state;
  const { bus } = options;
  const { runId, agentId, workItemId, sessionKey } = scope;
  bus.publish(
    'run:tool-started',
    { runId, toolCallId: call.id, toolName: call.name, arguments: call.arguments },
    scope,
  );
  const startedAt = clock.now();
  const outcome = await executeTracedToolCall(call, {
    registry: setup.registry!,
    allowedNames: setup.allowedNames,
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
        const result = await invokeTool(state, setup, inner, nested);
        nested.push(result);
        return result;
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
}

/** One call under the semaphore; a call still waiting for a slot when the run is aborted does not start. */
async function runTool(
  state: RunState,
  setup: RunSetup,
  call: ModelToolCall,
  nested: ToolCallOutcome[],
): Promise<ToolCallOutcome> {
  let release: () => void;
  try {
    release = await setup.semaphore.acquire(state.signal);
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
    return await invokeTool(state, setup, call, nested);
  } finally {
    release();
  }
}

/**
 * All tool calls of a turn, at most `maxParallelTools` at once, results in call order. Over budget, or
 * without tools, each call gets an error result instead of running.
 */
export async function runToolBatch(
  state: RunState,
  setup: RunSetup,
  toolCalls: ModelToolCall[],
  budgetExceeded: boolean,
): Promise<ToolBatchResult> {
  const nested: ToolCallOutcome[] = [];
  const outcomes: ToolCallOutcome[] = budgetExceeded
    ? toolCalls.map((call) => ({
        toolCallId: call.id,
        toolName: call.name,
        arguments: call.arguments,
        content: 'Not run: the run reached its token or cost budget.',
        isError: true,
        status: 'aborted' as const,
      }))
    : setup.registry
      ? await Promise.all(toolCalls.map((call) => runTool(state, setup, call, nested)))
      : toolCalls.map((call) => ({
          toolCallId: call.id,
          toolName: call.name,
          arguments: call.arguments,
          content: `Unknown tool "${call.name}": no tools are available in this run.`,
          isError: true,
          status: 'unknown_tool' as const,
        }));
  return { outcomes, nested };
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
  const toolMessages: ModelMessage[] = batch.outcomes.map((outcome) => ({
    role: 'tool',
    toolCallId: outcome.toolCallId,
    toolName: outcome.toolName,
    content: outcome.content,
    ...(outcome.isError ? { isError: true } : {}),
  }));
  state.newMessages.push(...toolMessages);

  const steps: StepMarker[] = [];
  const learned: LearnedEntry[] = [];
  let wroteLedger = false;
  for (const outcome of [...batch.outcomes, ...batch.nested]) {
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
  state.activeSkills = window.activeSkills();
  steps.sort((left, right) => left.seq - right.seq);
  const tokensBeforeClose = steps.length ? estimateTokens(window.render()) : 0;
  const messagesBeforeClose = steps.length ? window.render().length : 0;
  learned.sort((left, right) => left.seq - right.seq);
  if (
    window.appendTurn([assistant, ...toolMessages], steps, learned) &&
    contextOptions.truncateClosedBlocks
  ) {
    state.compactions++;
    const after = window.render();
    options.bus.publish(
      'engage:compacted',
      {
        runId: scope.runId,
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
  return { wroteLedger };
}
