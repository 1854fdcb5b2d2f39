import './events.js';
import { coerceError } from '../util/index.js';
import { abortedError, finish, recordInLedger } from './finish.js';
import { createRunState, overBudget } from './run-state.js';
import { prepareRun } from './setup.js';
import { recordToolResults, runToolBatch } from './tool-batch.js';
import { type RunTrace, traceRun, untracedRun } from './tracing.js';
import { runModelTurn } from './turn.js';
import { EngageErrorCodes, type EngageOptions, type EngageResult } from './types.js';

export {
  type EngageContextOptions,
  EngageErrorCodes,
  type EngageLimits,
  type EngageOptions,
  type EngageResult,
  type EngageUsage,
} from './types.js';

const nudgeText = (turns: number) =>
  `[agentd] ${turns} turns have passed without a ledger entry. Record your plan, findings and decisions with ` +
  'ledger_append, and write a `step` entry when you finish a step: your context is compacted from the ledger.';

/**
 * The agent loop: model call → all tool calls of the turn in parallel (bounded), results in call order →
 * next call, until the model ends its turn or a limit, a hook, an abort or a provider error stops the run.
 * Never throws for run failures: the outcome is in `status`; `run:*` events are published throughout.
 *
 * The steps are modules of their own, sharing one `RunState`: `setup.ts` (context window, tools, skills),
 * `turn.ts` (one model call), `tool-batch.ts` (the turn's tool calls and their results), `finish.ts`.
 */
export function runEngage(options: EngageOptions): Promise<EngageResult> {
  return traceRun(options, (spans) => runLoop(options, spans));
}

async function runLoop(options: EngageOptions, spans: RunTrace): Promise<EngageResult> {
  const state = createRunState(options, spans);
  const { model, bus, workItemId } = options;
  const { scope, logger, limits, contextOptions, usage } = state;
  const { runId, agentId, sessionKey } = scope;

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

  try {
    const setup = await prepareRun(state);
    const traced = spans !== untracedRun;
    let turnsWithoutLedgerWrite = 0;

    for (let turn = 1; turn <= limits.maxTurns; turn++) {
      // An untraced run calls its steps directly: no closure per turn for a span that records nothing.
      const step = traced
        ? await spans.turn(turn, () => runModelTurn(state, setup, turn))
        : await runModelTurn(state, setup, turn);
      if ('result' in step) return step.result;

      const budgetExceeded = overBudget(state);
      const batch = traced
        ? await spans.inTurn(() => runToolBatch(state, setup, step.toolCalls, budgetExceeded))
        : await runToolBatch(state, setup, step.toolCalls, budgetExceeded);
      const { wroteLedger } = recordToolResults(state, setup, step.assistant, batch);

      if (budgetExceeded) {
        const message = `The run used ${usage.inputTokens + usage.outputTokens} tokens${usage.costUsd !== undefined ? ` ($${usage.costUsd.toFixed(4)})` : ''}, over its budget.`;
        await recordInLedger(options.ledger, workItemId, 'note', `run ${runId} stopped: ${message}`, logger);
        return finish(state, 'budget_exceeded', {
          code: EngageErrorCodes.budgetExceeded,
          message,
          retryable: false,
        });
      }
      if (state.aborted()) return finish(state, 'aborted', abortedError());

      turnsWithoutLedgerWrite = wroteLedger ? 0 : turnsWithoutLedgerWrite + 1;
      if (
        setup.canWriteLedger &&
        contextOptions.ledgerNudgeInterval > 0 &&
        turnsWithoutLedgerWrite >= contextOptions.ledgerNudgeInterval
      ) {
        setup.window.appendNote(nudgeText(turnsWithoutLedgerWrite));
        bus.publish('engage:nudged', { runId, turnsWithoutLedgerWrite }, scope);
        turnsWithoutLedgerWrite = 0;
      }
    }

    const message = `The run stopped after ${limits.maxTurns} turns without finishing.`;
    await recordInLedger(options.ledger, workItemId, 'note', `run ${runId}: ${message}`, logger);
    return finish(state, 'max_turns', { code: EngageErrorCodes.maxTurns, message, retryable: false });
  } catch (error) {
    if (state.aborted()) return finish(state, 'aborted', abortedError());
    const coerced = coerceError(error);
    logger.error({ err: error }, 'engage loop failed');
    return finish(state, 'error', {
      code: coerced.code,
      message: coerced.message,
      retryable: coerced.retryable,
    });
  }
}
