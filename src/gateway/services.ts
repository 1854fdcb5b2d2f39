import type { RunStatus } from '../bus/index.js';
import type { GatewayProtocol } from './method-table.js';

/**
 * The narrow interfaces the gateway calls. runtime.ts implements them on top of sessions, memory and the
 * engage loop; tests use fakes. Everything here is plain data so it can go straight onto the wire.
 */

export interface ChatSource {
  protocol: GatewayProtocol;
  connId: string;
  clientId: string;
}

export interface ChatRunResult {
  runId: string;
  status: RunStatus;
  /** Final assistant text ('' when the run produced none). */
  text: string;
  assistantMemoryId?: string;
  userMemoryId?: string;
  error?: { code: string; message: string; retryable: boolean };
  startedAt?: number;
  endedAt?: number;
  model?: string;
  usage?: { inputTokens: number; outputTokens: number };
}

export type ChatRole = 'user' | 'assistant' | 'system' | 'tool';

export interface ChatHistoryMessage {
  role: ChatRole;
  content: string;
  memoryId: string;
  timestamp: number;
  runId?: string;
}

export interface GatewayChatService {
  /**
   * Starts a run for one user message (the engage loop publishes its `run:*` events on the bus). Runs of one
   * session are serialized by the service. `status: 'in_flight'` when a run with this idempotency key is
   * queued or running; `ended` when it has ended, also before a restart, with how.
   */
  send(input: {
    sessionKey: string;
    agentId: string;
    text: string;
    idempotencyKey: string;
    source: ChatSource;
  }): Promise<
    | { runId: string; status: 'started' | 'in_flight' }
    | { runId: string; status: 'ended'; outcome: Pick<ChatRunResult, 'status' | 'error'> }
  >;
  /**
   * Resolves when the run ends (after `run:finished` was published). Rejects with a UserInputError `TIMEOUT`
   * when `timeoutMs` passes first (the run continues) and `NOT_FOUND` for an unknown run.
   */
  wait(runId: string, options?: { timeoutMs?: number }): Promise<ChatRunResult>;
  abort(input: { sessionKey: string; runId?: string }): Promise<{ aborted: boolean; runIds: string[] }>;
  /**
   * Appends a message to the transcript without starting a run; sent again under its `idempotencyKey`, it
   * answers the entry already written.
   */
  inject(input: {
    sessionKey: string;
    role: 'assistant' | 'system';
    text: string;
    label?: string;
    idempotencyKey?: string;
  }): Promise<{
    memoryId: string;
  }>;
  /** Oldest first; `beforeMemoryId` pages backwards. */
  history(input: { sessionKey: string; limit: number; beforeMemoryId?: string }): Promise<{
    sessionKey: string;
    sessionId: string;
    messages: ChatHistoryMessage[];
    hasMore?: boolean;
  }>;
}

export interface SessionSummary {
  key: string;
  sessionId: string;
  agentId: string;
  createdAt: number;
  updatedAt: number;
  messageCount: number;
  label?: string;
  summary?: string;
  model?: string;
  thinkingLevel?: string;
  archived?: boolean;
}

export interface SessionPreview {
  key: string;
  status: 'ok' | 'missing';
  items: Array<{ role: ChatRole; text: string }>;
}

export interface SessionService {
  list(input: {
    agentId?: string;
    limit: number;
    includeArchived: boolean;
    search?: string;
  }): Promise<SessionSummary[]>;
  preview(input: { keys: string[]; limit: number; maxChars: number }): Promise<SessionPreview[]>;
  /** The session's current entry; undefined when the key has no active session yet. */
  describe(input: { sessionKey: string }): Promise<SessionSummary | undefined>;
  /** Opens the session under `sessionKey` (a no-op when it exists), with an optional label. */
  create(input: { sessionKey: string; agentId: string; label?: string }): Promise<{
    session: SessionSummary;
    created: boolean;
  }>;
  /** Starts a fresh transcript under the same key; the old one is archived (kept and recallable) when `archive`. */
  reset(input: { sessionKey: string; reason: 'new' | 'reset'; archive: boolean }): Promise<{
    sessionKey: string;
    sessionId: string;
    archived: boolean;
    previousSessionId?: string;
  }>;
  delete(input: { sessionKey: string; deleteTranscript: boolean }): Promise<{ deleted: boolean }>;
  compact(input: { sessionKey: string; maxLines?: number }): Promise<{
    compacted: boolean;
    entriesBefore?: number;
    entriesAfter?: number;
    tokensBefore?: number;
    tokensAfter?: number;
  }>;
  /** `null` clears a field. */
  patch(input: {
    sessionKey: string;
    label?: string | null;
    model?: string | null;
    thinkingLevel?: string | null;
  }): Promise<SessionSummary>;
}

/**
 * Memory items keep the Spiderweb wire shapes:
 * `{kind:"summary", source, id, source_id, created_at_ms, text}` and
 * `{kind:"entry", source, id, role, state, related_to, content}`.
 */
export type GatewayMemoryItem = { kind: 'summary' | 'entry' } & Record<string, unknown>;

export interface MemoryQueryService {
  query(input: {
    sessionKey: string;
    agentId: string;
    topic?: string;
    memoryIds?: string[];
    kind: 'summary' | 'entry' | 'all';
    limit: number;
    includeArchived: boolean;
  }): Promise<{ items: GatewayMemoryItem[] }>;
  recall(input: {
    sessionKey: string;
    agentId: string;
    limit: number;
    includeArchived: boolean;
    includeFull: boolean;
  }): Promise<{ items: GatewayMemoryItem[] }>;
}

export interface HealthService {
  /** Liveness and component health; served on `GET /health` and the `health` method. No secrets. */
  health(): Promise<Record<string, unknown>> | Record<string, unknown>;
  /** Richer runtime status for operators (`status` method). */
  status(): Promise<Record<string, unknown>> | Record<string, unknown>;
}

/** A model agentd can run on. `id` is the model id without its provider (`agentd-local`, `gpt-4o`). */
export interface ModelEntry {
  id: string;
  provider: string;
  contextWindow: number;
  /** True for models that run in-process without a network. */
  local: boolean;
}

export interface ModelCatalogService {
  /** Every configured model (the default and each agent's own), default first, no duplicates. */
  list(): ModelEntry[];
  /** The model an agent runs on (the default for agents without their own). */
  forAgent(agentId: string): ModelEntry;
}

/** The agents a client can talk to (the configured ones and those spawned at run time). */
export interface AgentDirectoryService {
  list(): Array<{ id: string; name?: string }>;
  /** Work items per state (agentd's tasks), when the worker pool is on. */
  workCounts(): Promise<Record<string, number> | undefined>;
}

export interface GatewayServices {
  chat: GatewayChatService;
  sessions: SessionService;
  models: ModelCatalogService;
  agents: AgentDirectoryService;
  memory: MemoryQueryService;
  health: HealthService;
}
