import type { RunStatus } from '../bus/index.js';
import type { Ledger } from '../ledger/index.js';
import { coerceError, ErrorCodes, type Logger } from '../util/index.js';
import { type RunState, resultOf } from './run-state.js';
import type { EngageResult } from './types.js';

/**
 * Ends the run: stops following the caller's signal, runs `beforeFinish` (a failure there turns the run
 * into an `error`), publishes `run:finished`, and returns the result.
 */
export async function finish(
  state: RunState,
  status: RunStatus,
  error?: EngageResult['error'],
): Promise<EngageResult> {
  const { options, scope } = state;
  state.detach();
  if (options.beforeFinish) {
    try {
      // beforeFinish sees the result the caller will get, unless beforeFinish itself fails the run.
      await options.beforeFinish(resultOf(state, status, error));
    } catch (caught) {
      const coerced = coerceError(caught);
      state.logger.error({ err: caught }, 'beforeFinish failed; the run is reported as failed');
      status = 'error';
      error = { code: coerced.code, message: coerced.message, retryable: coerced.retryable };
    }
  }
  options.bus.publish(
    'run:finished',
    {
      runId: scope.runId,
      status,
      text: state.lastText,
      usage: { ...state.usage },
      turns: state.turns,
      ...(error ? { error } : {}),
    },
    scope,
  );
  return resultOf(state, status, error);
}

export function abortedError(): EngageResult['error'] {
  return { code: ErrorCodes.aborted, message: 'The run was aborted.', retryable: false };
}

/** Best effort: a run's failure is worth keeping for a retry, but never worth failing the run over. */
export async function recordInLedger(
  ledger: Ledger | undefined,
  workItemId: string,
  entryType: 'error' | 'note',
  content: string,
  logger: Logger,
): Promise<void> {
  if (!ledger) return;
  try {
    await ledger.append(workItemId, { entryType, content });
  } catch (error) {
    logger.warn({ err: error }, 'could not record the run outcome in the ledger');
  }
}
