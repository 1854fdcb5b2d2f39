import type { WorkState } from './states.js';

/** Fields every `work:*` event carries. `remote` is true when the change happened in another process. */
export interface WorkEventBase {
  workItemId: string;
  kind: string;
  state: WorkState;
  agentId: string | null;
  parentId: string | null;
  remote?: boolean;
}

export interface WorkErrorPayload {
  code: string;
  message: string;
  retryable: boolean;
}

declare module '../bus/events.js' {
  interface BusEventMap {
    'work:submitted': WorkEventBase & {
      title: string;
      priority: number;
      speculative: boolean;
      sessionKey: string | null;
    };
    /** A submission whose dedup key matched a live item: recorded as `mergedRecordId`, merged into `workItemId`. */
    'work:merged': WorkEventBase & { mergedRecordId: string; dedupKey: string };
    'work:claimed': WorkEventBase & { workerId: string; attempt: number; leaseExpiresAt: number };
    'work:started': WorkEventBase & { workerId: string; attempt: number };
    'work:completed': WorkEventBase & { durationMs: number; summary?: string };
    /** `willRetry`: the item went back to `queued` and runs again at `retryAt`. */
    'work:failed': WorkEventBase & {
      error: WorkErrorPayload;
      attempt: number;
      willRetry: boolean;
      retryAt?: number;
    };
    'work:dead': WorkEventBase & { error: WorkErrorPayload; attempt: number };
    'work:cancelled': WorkEventBase & { reason?: string };
    'work:paused': WorkEventBase & { previousState: WorkState };
    'work:resumed': WorkEventBase;
    'work:blocked': WorkEventBase & { reason: string; waitingOn: string[] };
    'work:unblocked': WorkEventBase;
    /** A claim that lapsed (dead worker) or was handed back: the item runs again. */
    'work:requeued': WorkEventBase & { reason: 'lease-expired' | 'released' };
    'work:waiting': WorkEventBase & { waitingOn: string[] };
  }
}
