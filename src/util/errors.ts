/**
 * Typed errors with stable codes, grouped by who is at fault.
 *
 * - `user`: the caller sent something wrong (bad input, unknown id, not allowed). Fix the request.
 * - `provider`: a model provider or other upstream failed. Often retryable.
 * - `system`: agentd itself or its environment failed (database, disk, a bug).
 *
 * `isInstance` uses a global symbol so checks survive duplicated package copies where `instanceof` breaks;
 * a fault's class (`UserInputError.isInstance`) also checks the fault, since the symbol is on every agentd error.
 */
const marker = Symbol.for('agentd.error');

/** Whose fault an error is: the caller's input, a model provider, or agentd's own system. */
export type ErrorFault = 'user' | 'provider' | 'system';

/** What every agentd error carries: a stable code, a message and its fault. */
export interface AgentdErrorOptions {
  code: string;
  message: string;
  fault: ErrorFault;
  retryable?: boolean;
  details?: Record<string, unknown>;
  cause?: unknown;
}

/** The base of every error agentd throws; `code` is stable (one of `ErrorCodes`), `message` is for people. */
export class AgentdError extends Error {
  readonly [marker] = true;
  readonly code: string;
  readonly fault: ErrorFault;
  readonly retryable: boolean;
  readonly details: Record<string, unknown> | undefined;

  constructor(options: AgentdErrorOptions) {
    super(options.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options.code;
    this.fault = options.fault;
    this.retryable = options.retryable ?? false;
    this.details = options.details;
  }

  static isInstance(error: unknown): error is AgentdError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[marker] === true;
  }

  /** The wire shape used by both gateway protocols and the CLI's `--json` output. */
  toJSON(): { code: string; message: string; retryable: boolean; details?: Record<string, unknown> } {
    return {
      code: this.code,
      message: this.message,
      retryable: this.retryable,
      ...(this.details ? { details: this.details } : {}),
    };
  }
}

type SubclassOptions = Omit<AgentdErrorOptions, 'fault'>;

/** The caller's fault: invalid input, unknown id, forbidden, conflict. */
export class UserInputError extends AgentdError {
  constructor(options: SubclassOptions) {
    super({ ...options, fault: 'user' });
  }

  static override isInstance(error: unknown): error is UserInputError {
    return AgentdError.isInstance(error) && error.fault === 'user';
  }
}

/** An upstream (model provider, embedding server, command backend) failed. */
export class ProviderError extends AgentdError {
  readonly statusCode: number | undefined;
  constructor(options: SubclassOptions & { statusCode?: number }) {
    super({ ...options, fault: 'provider' });
    this.statusCode = options.statusCode;
  }

  static override isInstance(error: unknown): error is ProviderError {
    return AgentdError.isInstance(error) && error.fault === 'provider';
  }
}

/** agentd or its environment failed. */
export class SystemError extends AgentdError {
  constructor(options: SubclassOptions) {
    super({ ...options, fault: 'system' });
  }

  static override isInstance(error: unknown): error is SystemError {
    return AgentdError.isInstance(error) && error.fault === 'system';
  }
}

/**
 * Stable error codes. Codes are part of the public contract: clients branch on them.
 * Subsystems may use codes not listed here, but every code is SCREAMING_SNAKE_CASE and documented in docs/.
 */
export const ErrorCodes = {
  invalidRequest: 'INVALID_REQUEST',
  invalidConfig: 'INVALID_CONFIG',
  notFound: 'NOT_FOUND',
  unauthorized: 'UNAUTHORIZED',
  forbidden: 'FORBIDDEN',
  conflict: 'CONFLICT',
  payloadTooLarge: 'PAYLOAD_TOO_LARGE',
  unknownMethod: 'UNKNOWN_METHOD',
  queueFull: 'QUEUE_FULL',
  /** An agent asked for a CLI backend this server has no preset or configuration for. */
  unknownBackend: 'UNKNOWN_BACKEND',
  aborted: 'ABORTED',
  timeout: 'TIMEOUT',
  providerError: 'PROVIDER_ERROR',
  providerRateLimited: 'PROVIDER_RATE_LIMITED',
  providerUnavailable: 'PROVIDER_UNAVAILABLE',
  providerTimeout: 'PROVIDER_TIMEOUT',
  providerAuth: 'PROVIDER_AUTH',
  storeUnavailable: 'STORE_UNAVAILABLE',
  runInterrupted: 'RUN_INTERRUPTED',
  /** A chat run that ended before a restart and stored no reply: failed, or answered nothing. */
  runOutcomeUnknown: 'RUN_OUTCOME_UNKNOWN',
  schemaTooNew: 'SCHEMA_TOO_NEW',
  /** Stored JSON that is not JSON, too large, or not of the shape (or a version) this build can read. */
  jsonUndecodable: 'JSON_UNDECODABLE',
  mcpUnavailable: 'MCP_UNAVAILABLE',
  internal: 'INTERNAL',
  toolModuleNotFound: 'TOOL_MODULE_NOT_FOUND',
  toolModuleImportFailed: 'TOOL_MODULE_IMPORT_FAILED',
  toolModuleInvalid: 'TOOL_MODULE_INVALID',
  /** A tool threw something that is not an AgentdError (what on_error hooks see as its code). */
  toolFailed: 'TOOL_FAILED',
} as const;

/** An error as clients see it: its code, its message for people, whether retrying may help. */
export type ErrorJson = ReturnType<AgentdError['toJSON']>;

/**
 * What a client is told of a failure: an error agentd raised on purpose, whoever's fault, keeps its code and
 * message (a STORE_UNAVAILABLE tells it to retry later); anything else is a bug, answered INTERNAL with
 * `internalMessage`, its details left to the server log. The gateway's frames, a chat turn's and a command's
 * finals all answer by this rule.
 */
export function errorForClient(error: unknown, internalMessage: string): ErrorJson {
  return AgentdError.isInstance(error)
    ? error.toJSON()
    : { code: ErrorCodes.internal, message: internalMessage, retryable: false };
}

/** Turns any thrown value into an AgentdError, keeping the original as `cause`. */
export function coerceError(error: unknown): AgentdError {
  if (AgentdError.isInstance(error)) return error;
  if (error instanceof Error && error.name === 'AbortError') {
    return new UserInputError({
      code: ErrorCodes.aborted,
      message: 'The operation was aborted.',
      cause: error,
    });
  }
  const message = error instanceof Error ? error.message : String(error);
  return new SystemError({ code: ErrorCodes.internal, message, cause: error });
}
