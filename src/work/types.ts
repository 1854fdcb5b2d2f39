import { z } from 'zod';
import type { WorkState } from './states.js';

export interface WorkOutcome {
  /** What the work produced; `data.summary` (a string) is shown in awareness digests and syntheses. */
  data?: unknown;
  error?: { code: string; message: string; retryable: boolean };
  durationMs?: number;
}

export interface WorkItem {
  id: string;
  kind: string;
  agentId: string | null;
  title: string;
  description: string;
  params: Record<string, unknown>;
  /** Higher runs first. */
  priority: number;
  state: WorkState;
  dedupKey: string | null;
  /** Set on `merged` records: the live item the submission was merged into. */
  mergedInto: string | null;
  parentId: string | null;
  depth: number;
  attempts: number;
  maxAttempts: number;
  leaseOwner: string | null;
  leaseExpiresAt: number | null;
  /** Not claimable before this time (retry backoff, delayed submission). */
  runAfter: number;
  /** Proposed by the heartbeat, not asked for by anyone; created paused unless policy allows auto-run. */
  speculative: boolean;
  rationale: string | null;
  /** Child ids the item is awaiting (set while `await_child_work` waits; survives a restart). */
  waitingOn: string[] | null;
  /** Why the item is in its state (block reason, lease expiry, cancel reason). */
  stateReason: string | null;
  outcome: WorkOutcome | null;
  sessionKey: string | null;
  source: string | null;
  createdAt: number;
  updatedAt: number;
  startedAt: number | null;
  resolvedAt: number | null;
}

const kindPattern = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/;

/** A submission as it arrives from a tool, the gateway or the CLI. */
export const workSubmissionSchema = z.object({
  kind: z.string().regex(kindPattern, 'letters, digits, _ . : - (at most 64 characters)'),
  title: z.string().min(1).max(200).optional(),
  description: z.string().max(20_000).default(''),
  agentId: z.string().min(1).max(128).optional(),
  params: z.record(z.string(), z.unknown()).default({}),
  /** Defaults to the parent's priority for child work, else 0. */
  priority: z.number().int().min(-1000).max(1000).optional(),
  dedupKey: z.string().min(1).max(500).optional(),
  /**
   * Names the submission: the same key again answers the item made the first time (`duplicate: true`),
   * whatever its state, for as long as the item is kept.
   */
  idempotencyKey: z.string().min(1).max(256).optional(),
  parentId: z.string().min(1).optional(),
  maxAttempts: z.number().int().min(1).max(100).optional(),
  /** Not claimable for this long after submission. */
  delayMs: z.number().int().min(0).optional(),
  speculative: z.boolean().default(false),
  rationale: z.string().max(4_000).optional(),
  /** Defaults to the parent's session for child work. */
  sessionKey: z.string().min(1).max(512).optional(),
  source: z.string().max(200).optional(),
  /** Create the item paused (awaiting approval) instead of queued. */
  paused: z.boolean().default(false),
});

export type WorkSubmission = z.input<typeof workSubmissionSchema>;

export interface SubmitResult {
  /** The live item's id: the new item, or the one the submission was merged into. */
  id: string;
  merged: boolean;
  /** The `merged` record kept for the duplicate submission. */
  mergedRecordId?: string;
  /** The submission's idempotency key was submitted before: this is what that submission answered. */
  duplicate?: true;
}

export interface ClaimFilter {
  kinds?: ReadonlyArray<string>;
  excludeKinds?: ReadonlyArray<string>;
  agentIds?: ReadonlyArray<string>;
  leaseMs?: number;
  /**
   * Claim and start in one statement (queued → claimed → running, both transitions published): saves a
   * round trip for a worker that starts what it claims at once.
   */
  start?: boolean;
}

export interface WorkListFilter {
  states?: ReadonlyArray<WorkState>;
  kind?: string;
  /** Leave out these kinds (system work, for listings that hide it). */
  excludeKinds?: ReadonlyArray<string>;
  /** Only these kinds. */
  kinds?: ReadonlyArray<string>;
  agentId?: string;
  sessionKey?: string;
  parentId?: string;
  speculative?: boolean;
  /** Only items resolved at or after this time. */
  resolvedSince?: number;
  /** Only items last updated before this time (stall detection). */
  updatedBefore?: number;
  limit?: number;
  order?: 'newest' | 'oldest' | 'recently-resolved';
}
