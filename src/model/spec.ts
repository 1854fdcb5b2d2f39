/**
 * The model specification, version 1. Every provider implements `LanguageModel`; everything above L1
 * talks to models only through `streamModel` / `completeModel` (see `call.ts`), never to a provider SDK.
 *
 * Contract: once `doStream` has been called, failures are encoded in the stream as a final `error` event
 * followed by nothing else; `doStream` never throws and the iterator never rejects.
 */

export interface ModelToolCall {
  /** Provider-assigned call id; results are matched back by this id. */
  id: string;
  name: string;
  /** Parsed JSON arguments. When the model sent unparseable JSON this is `{ __raw: string }`. */
  arguments: Record<string, unknown>;
}

/**
 * One message of a conversation in the provider-neutral form every provider maps from. A provider may keep
 * what it encoded of a frozen message (memory's context hands out its messages frozen, tool calls and their
 * arguments included): freeze only a message that will not change.
 */
export type ModelMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: ModelToolCall[] }
  | { role: 'tool'; toolCallId: string; toolName: string; content: string; isError?: boolean };

/**
 * A tool offered to the model: its name, description and JSON Schema for the arguments. A provider may keep
 * what it encoded of a frozen definition whose schema is frozen (the tool registry hands its definitions out
 * deeply frozen): freeze only a definition that will not change.
 */
export interface ModelToolDefinition {
  name: string;
  description: string;
  /** JSON Schema (draft 2020-12 subset) of the arguments object. */
  inputSchema: Record<string, unknown>;
}

/** One model call: the conversation, the tools on offer and the sampling options. */
export interface ModelRequest {
  messages: ModelMessage[];
  tools?: readonly ModelToolDefinition[];
  /** `auto` by default; `none` forbids tool calls; `{ name }` forces one tool. */
  toolChoice?: 'auto' | 'none' | 'required' | { name: string };
  maxTokens?: number;
  temperature?: number;
  /** Ask for a JSON object reply, optionally matching a JSON Schema. */
  responseFormat?: { type: 'json'; schema?: Record<string, unknown>; name?: string };
  /** Free-form hints for the `local` model and telemetry (e.g. `{ purpose: 'plan' }`). Not sent to providers. */
  metadata?: Record<string, unknown>;
}

/** Why a model stream finished. */
export type ModelStopReason =
  | 'end_turn'
  | 'tool_calls'
  | 'max_tokens'
  | 'stop_sequence'
  | 'content_filter'
  | 'aborted'
  | 'error';

/** Tokens a model call consumed, as the provider counted them. */
export interface ModelUsage {
  inputTokens: number;
  outputTokens: number;
}

/** The error that ends a model stream; providers never throw, they end with this. */
export interface ModelStreamError {
  /** Stable code from ErrorCodes (PROVIDER_RATE_LIMITED, PROVIDER_TIMEOUT, ABORTED, …). */
  code: string;
  message: string;
  retryable: boolean;
  statusCode?: number;
  /** How long the provider asked us to wait before retrying (from `retry-after`), when it said. */
  retryAfterMs?: number;
}

/** What a model stream yields: text and tool-call deltas, usage, then exactly one `finish` or `error`. */
export type ModelStreamEvent =
  | { type: 'text-delta'; text: string }
  | { type: 'tool-call'; toolCall: ModelToolCall }
  | { type: 'usage'; usage: ModelUsage }
  | { type: 'finish'; stopReason: ModelStopReason }
  | { type: 'error'; error: ModelStreamError };

/** Per-call options of `LanguageModel.doStream`. */
export interface ModelCallOptions {
  signal?: AbortSignal;
  /**
   * Whether the call has been aborted, for a provider that only checks between chunks (the local model).
   * `streamModel` makes the provider's `signal` on its first read, an AbortSignal that costs more than an
   * in-process model's whole reply; reading `aborted` makes none. Absent when a caller passed only `signal`:
   * read it as `callAborted(options)`.
   */
  readonly aborted?: boolean;
}

/** Whether a provider's call has been aborted, without making the wrapper's signal when it need not. */
export function callAborted(options: ModelCallOptions): boolean {
  return options.aborted ?? options.signal?.aborted ?? false;
}

/** The model spec v1: what every provider factory returns and `createRuntime({ model })` accepts. */
export interface LanguageModel {
  readonly specificationVersion: 'v1';
  /** `openai`, `anthropic`, `command`, `local`, `scripted`, … */
  readonly provider: string;
  readonly modelId: string;
  /** Context window in tokens, used for compaction thresholds. */
  readonly contextWindowTokens: number;
  /** Streams normalized events. See the contract at the top of this file. */
  doStream(request: ModelRequest, options: ModelCallOptions): AsyncIterable<ModelStreamEvent>;
  /**
   * Optional: loads what the first call would load (the provider's SDK, the HTTP classes it builds requests
   * with) without calling the provider, so a process that waits for its first turn can get it out of that
   * turn's way. May reject (the SDK could not be loaded); the first call then fails the same way, in its stream.
   */
  prepare?(): Promise<void>;
}

/** The folded result of one model call. */
export interface ModelResponse {
  text: string;
  toolCalls: ModelToolCall[];
  usage: ModelUsage;
  stopReason: ModelStopReason;
  /** Set when stopReason is `error` or `aborted`. */
  error?: ModelStreamError;
}
