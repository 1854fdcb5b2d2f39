import type { BusEventMap } from '../../bus/index.js';
import type { WorkEventBase } from '../events.js';
import { outcomeSummary } from '../rows.js';
import { WorkErrorCodes } from '../states.js';
import type { WorkItem } from '../types.js';
import { type QueueContext, wake } from './context.js';

/** The fields every `work:*` event carries; `remote` marks a change made by another process. */
export function eventBase(item: WorkItem, remote?: boolean): WorkEventBase {
  return {
    workItemId: item.id,
    kind: item.kind,
    state: item.state,
    agentId: item.agentId,
    parentId: item.parentId,
    ...(remote ? { remote: true } : {}),
  };
}

export function publish<K extends keyof BusEventMap & `work:${string}`>(
  ctx: QueueContext,
  type: K,
  item: WorkItem,
  data: BusEventMap[K],
): void {
  ctx.bus?.publish(type, data, {
    workItemId: item.id,
    ...(item.agentId ? { agentId: item.agentId } : {}),
    ...(item.sessionKey ? { sessionKey: item.sessionKey } : {}),
  });
}

/** Announces an item that reached a terminal state (nothing for any other state). */
export function publishTerminal(ctx: QueueContext, item: WorkItem, remote?: boolean): void {
  const error = item.outcome?.error ?? {
    code: WorkErrorCodes.noErrorRecorded,
    message: 'no error recorded',
    retryable: false,
  };
  switch (item.state) {
    case 'completed': {
      const summary = outcomeSummary(item);
      publish(ctx, 'work:completed', item, {
        ...eventBase(item, remote),
        durationMs: item.outcome?.durationMs ?? 0,
        ...(summary !== undefined ? { summary } : {}),
      });
      break;
    }
    case 'failed':
      publish(ctx, 'work:failed', item, {
        ...eventBase(item, remote),
        error,
        attempt: item.attempts,
        willRetry: false,
      });
      break;
    case 'dead':
      publish(ctx, 'work:dead', item, { ...eventBase(item, remote), error, attempt: item.attempts });
      break;
    case 'cancelled':
      publish(ctx, 'work:cancelled', item, {
        ...eventBase(item, remote),
        ...(item.stateReason ? { reason: item.stateReason } : {}),
      });
      break;
    default:
      break;
  }
}

/** `work:submitted`; a queued item also wakes this process's waiting workers unless `wakeWorkers` is false. */
export function announceSubmitted(
  ctx: QueueContext,
  item: WorkItem,
  wakeWorkers = item.state === 'queued',
): void {
  publish(ctx, 'work:submitted', item, {
    ...eventBase(item),
    title: item.title,
    priority: item.priority,
    speculative: item.speculative,
    sessionKey: item.sessionKey,
  });
  if (wakeWorkers) wake(ctx.state);
}
