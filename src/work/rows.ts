import type { WorkState } from './states.js';
import type { WorkItem, WorkOutcome } from './types.js';

/** The raw `work_items` row as both backends return it (BIGINT already a JS number). */
export interface WorkItemRow {
  id: string;
  kind: string;
  agent_id: string | null;
  title: string;
  description: string;
  params: string;
  priority: number;
  state: string;
  dedup_key: string | null;
  merged_into: string | null;
  parent_id: string | null;
  depth: number;
  attempts: number;
  max_attempts: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
  run_after: number;
  speculative: number;
  rationale: string | null;
  waiting_on: string | null;
  state_reason: string | null;
  outcome: string | null;
  session_key: string | null;
  source: string | null;
  created_at: number;
  updated_at: number;
  started_at: number | null;
  resolved_at: number | null;
}

function parseJsonColumn<T>(text: string | null, fallback: T): T {
  if (text === null || text === '') return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    // Rows are only written by this module; a damaged column must not make the whole item unreadable.
    return fallback;
  }
}

const toNumberOrNull = (value: number | null): number | null => (value === null ? null : Number(value));

export function rowToWorkItem(row: WorkItemRow): WorkItem {
  return {
    id: row.id,
    kind: row.kind,
    agentId: row.agent_id,
    title: row.title,
    description: row.description,
    params: parseJsonColumn<Record<string, unknown>>(row.params, {}),
    priority: Number(row.priority),
    state: row.state as WorkState,
    dedupKey: row.dedup_key,
    mergedInto: row.merged_into,
    parentId: row.parent_id,
    depth: Number(row.depth),
    attempts: Number(row.attempts),
    maxAttempts: Number(row.max_attempts),
    leaseOwner: row.lease_owner,
    leaseExpiresAt: toNumberOrNull(row.lease_expires_at),
    runAfter: Number(row.run_after),
    speculative: Number(row.speculative) === 1,
    rationale: row.rationale,
    waitingOn: parseJsonColumn<string[] | null>(row.waiting_on, null),
    stateReason: row.state_reason,
    outcome: parseJsonColumn<WorkOutcome | null>(row.outcome, null),
    sessionKey: row.session_key,
    source: row.source,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    startedAt: toNumberOrNull(row.started_at),
    resolvedAt: toNumberOrNull(row.resolved_at),
  };
}

/** `outcome.data.summary` when it is a string: what digests and syntheses show of a finished item. */
export function outcomeSummary(item: Pick<WorkItem, 'outcome'>): string | undefined {
  const data = item.outcome?.data;
  if (typeof data === 'string') return data;
  if (typeof data === 'object' && data !== null) {
    const summary = (data as Record<string, unknown>).summary;
    if (typeof summary === 'string') return summary;
  }
  return undefined;
}
