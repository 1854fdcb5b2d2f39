import { ErrorCodes, UserInputError } from '../../util/index.js';
import { isTerminalWorkState, type SubmitResult, type WorkSubmission } from '../../work/index.js';
import { checkIdle, classFor, type PoolState } from './state.js';

/**
 * Admits a task to its class: refused at once with `QUEUE_FULL` (and an `agent:progress` saturation event)
 * when the class already has `admissionQueueSize` tasks waiting. Never blocks.
 */
export async function admit(pool: PoolState, submission: WorkSubmission): Promise<SubmitResult> {
  const { queue, bus } = pool;
  const state = classFor(pool, submission.kind);
  if (!state) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `no worker class runs work of kind "${submission.kind}".`,
    });
  }
  const depth = state.admitted.size + state.reserved;
  if (depth >= state.options.admissionQueueSize) {
    bus?.publish(
      'agent:progress',
      {
        phase: 'saturated',
        message: `${state.name} workers are saturated: ${depth} task(s) already wait (limit ${state.options.admissionQueueSize}); the task was refused.`,
        queueDepth: depth,
        limit: state.options.admissionQueueSize,
        ...(submission.agentId ? { agentId: submission.agentId } : {}),
        ...(submission.sessionKey ? { sessionKey: submission.sessionKey } : {}),
      },
      submission.sessionKey ? { sessionKey: submission.sessionKey } : {},
    );
    throw new UserInputError({
      code: ErrorCodes.queueFull,
      message: `The ${state.name} work queue is full (${state.options.admissionQueueSize} waiting). Try again when tasks finish.`,
      retryable: true,
      details: { workerClass: state.name, queueDepth: depth, limit: state.options.admissionQueueSize },
    });
  }
  // Reserved synchronously so concurrent submissions cannot all pass the check before any is counted.
  state.reserved++;
  try {
    const result = await queue.submit(submission);
    if (!result.merged) {
      const item = await queue.get(result.id);
      if (item && !isTerminalWorkState(item.state) && item.state !== 'claimed' && item.state !== 'running') {
        state.admitted.add(result.id);
      }
    }
    return result;
  } finally {
    state.reserved--;
    checkIdle(pool);
  }
}
