import {
  type ModelEventSink,
  type ModelMessage,
  type ModelRequest,
  type ModelStreamError,
  type ModelStreamEvent,
  type ModelToolCall,
  streamModelTo,
} from '../model/index.js';
import type { HookPayloads } from '../tools/index.js';
import { ErrorCodes } from '../util/index.js';
import { compactIfNeeded, overContextBudget } from './compaction.js';
import { abortedError, finish, recordInLedger } from './finish.js';
import { addUsage, type RunState } from './run-state.js';
import type { RunSetup } from './setup.js';
import { EngageErrorCodes, type EngageResult } from './types.js';

/** A turn either ends the run (`result`) or asks for tool calls, to be run before the next turn. */
export type TurnOutcome = { result: EngageResult } | { assistant: ModelMessage; toolCalls: ModelToolCall[] };

/**
 * One model turn: compacts the context when it is over its threshold, lets `before_llm_call` hooks see
 * (or block) the request, streams the model's answer, and records it. A provider error, an abort, a
 * blocking hook or an answer without tool calls ends the run here.
 */
export async function runModelTurn(state: RunState, setup: RunSetup, turn: number): Promise<TurnOutcome> {
  const { options, scope, logger, contextOptions } = state;
  const { model, bus, workItemId } = options;
  const { runId, agentId, sessionKey } = scope;
  const { window, modelTools, streamOptions } = setup;
  if (state.aborted()) return { result: await finish(state, 'aborted', abortedError()) };

  const compaction = overContextBudget(window, setup.maxContextTokens, setup.overheadTokens)
    ? await compactIfNeeded({
        window,
        maxTokens: setup.maxContextTokens,
        overheadTokens: setup.overheadTokens,
        keepRecent: contextOptions.compactKeepRecent,
        minLedgerEntries: contextOptions.minLedgerEntries,
        ledger: options.ledger,
        workItemId,
        model,
        modelCallOptions: streamOptions,
        logger,
      })
    : undefined;
  if (compaction) {
    state.compactions++;
    addUsage(state, compaction.usage.inputTokens, compaction.usage.outputTokens);
    const { usage: _usage, ...event } = compaction;
    bus.publish('engage:compacted', { runId, ...event }, scope);
    if (state.aborted()) return { result: await finish(state, 'aborted', abortedError()) };
  }

  let requestMessages = window.render();
  if (options.hooks) {
    const payload: HookPayloads['before_llm_call'] = {
      runId,
      agentId,
      workItemId,
      turn,
      model: `${model.provider}/${model.modelId}`,
      messages: requestMessages,
      toolNames: modelTools.map((tool) => tool.name),
    };
    if (sessionKey !== undefined) payload.sessionKey = sessionKey;
    // The run's state is the options: its `signal` getter makes the run's own signal only if a hook is
    // there to read it.
    const outcome = await options.hooks.run('before_llm_call', payload, state);
    if (outcome.action === 'block') {
      return {
        result: await finish(state, 'blocked', {
          code: EngageErrorCodes.hookBlocked,
          message: `Blocked by hook ${outcome.hook}: ${outcome.reason}`,
          retryable: false,
        }),
      };
    }
    requestMessages = outcome.payload.messages;
  }

  state.turns = turn;
  const request: ModelRequest = { messages: requestMessages };
  if (modelTools.length) request.tools = modelTools;
  const callOptions = options.modelCallOptions;
  if (callOptions?.maxTokens !== undefined) request.maxTokens = callOptions.maxTokens;
  if (callOptions?.temperature !== undefined) request.temperature = callOptions.temperature;
  const stream = new TurnStream(state);
  await streamModelTo(model, request, stream, streamOptions);
  const { text, toolCalls, error: streamError } = stream;
  state.lastText = text;

  if (streamError) {
    // Partial text stays in the transcript; partial tool calls cannot (they would have no results).
    if (text !== '') state.newMessages.push({ role: 'assistant', content: text });
    if (streamError.code === ErrorCodes.aborted || state.aborted())
      return { result: await finish(state, 'aborted', abortedError()) };
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
    return {
      result: await finish(state, 'error', {
        code: streamError.code,
        message: streamError.message,
        retryable: streamError.retryable,
      }),
    };
  }

  const assistant: ModelMessage = toolCalls.length
    ? { role: 'assistant', content: text, toolCalls }
    : { role: 'assistant', content: text };
  state.newMessages.push(assistant);
  if (toolCalls.length === 0) {
    window.appendTurn([assistant], []);
    return { result: await finish(state, 'completed') };
  }
  return { assistant, toolCalls };
}

/**
 * The model's answer of one turn, taken event by event as the stream delivers them (text deltas are
 * published as they come). An object rather than a closure: its code is shared by every turn.
 */
class TurnStream implements ModelEventSink {
  text = '';
  readonly toolCalls: ModelToolCall[] = [];
  error: ModelStreamError | undefined;

  constructor(private readonly state: RunState) {}

  onEvent(event: ModelStreamEvent): void {
    if (event.type === 'text-delta') {
      this.text += event.text;
      const { options, scope } = this.state;
      options.bus.publish(
        'run:text-delta',
        { runId: scope.runId, delta: event.text, text: this.text },
        scope,
      );
    } else if (event.type === 'tool-call') this.toolCalls.push(event.toolCall);
    else if (event.type === 'usage') addUsage(this.state, event.usage.inputTokens, event.usage.outputTokens);
    else if (event.type === 'error') this.error = event.error;
  }
}
