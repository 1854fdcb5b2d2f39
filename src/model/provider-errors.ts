import { ErrorCodes } from '../util/index.js';
import type { ModelStreamError, ModelStreamEvent } from './spec.js';

/** Builds the final `error` event of a stream. */
export function errorEvent(error: ModelStreamError): ModelStreamEvent {
  return { type: 'error', error };
}

export function abortedError(): ModelStreamError {
  return { code: ErrorCodes.aborted, message: 'The model call was aborted.', retryable: false };
}

export function timeoutError(timeoutMs: number, what = 'The model call'): ModelStreamError {
  return {
    code: ErrorCodes.providerTimeout,
    message: `${what} did not finish within ${timeoutMs} ms.`,
    retryable: true,
  };
}

/**
 * Maps an HTTP status from a provider API to a stable code. 408/409/429/5xx are worth retrying (the same
 * set the provider SDKs retry themselves); 401/403 need a different key; other 4xx need a different request.
 */
export function errorFromStatus(
  status: number,
  message: string,
  extra: { retryAfterMs?: number } = {},
): ModelStreamError {
  const base = { message, statusCode: status, ...(extra.retryAfterMs === undefined ? {} : extra) };
  if (status === 401 || status === 403) return { ...base, code: ErrorCodes.providerAuth, retryable: false };
  if (status === 429) return { ...base, code: ErrorCodes.providerRateLimited, retryable: true };
  if (status === 408) return { ...base, code: ErrorCodes.providerTimeout, retryable: true };
  if (status >= 500 || status === 409)
    return { ...base, code: ErrorCodes.providerUnavailable, retryable: true };
  return { ...base, code: ErrorCodes.providerError, retryable: false };
}

/** `retry-after` (seconds or an HTTP date) or `retry-after-ms`, when present and sane. */
export function retryAfterFromHeaders(
  headers: { get(name: string): string | null } | undefined,
): number | undefined {
  if (!headers) return undefined;
  const milliseconds = Number(headers.get('retry-after-ms'));
  if (Number.isFinite(milliseconds) && milliseconds > 0) return milliseconds;
  const raw = headers.get('retry-after');
  if (!raw) return undefined;
  const seconds = Number(raw);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(raw);
  if (Number.isFinite(date)) return Math.max(0, date - Date.now());
  return undefined;
}

/** Removes a secret from text that may have been echoed by an upstream (some APIs quote the key they got). */
export function redactSecret(text: string, secret: string | undefined): string {
  if (!secret || secret.length < 4) return text;
  return text.split(secret).join('[redacted]');
}

interface SdkErrorShape {
  name?: string;
  message?: string;
  status?: number;
  headers?: { get(name: string): string | null };
  type?: string | null;
  error?: { type?: string; error?: { type?: string } } | null;
}

const retryableErrorTypes: Record<string, string> = {
  server_error: ErrorCodes.providerUnavailable,
  api_error: ErrorCodes.providerUnavailable,
  overloaded_error: ErrorCodes.providerUnavailable,
  rate_limit_error: ErrorCodes.providerRateLimited,
  rate_limit_exceeded: ErrorCodes.providerRateLimited,
};

/**
 * Maps what the official OpenAI and Anthropic SDKs throw (their error classes share a shape) to a stream
 * error. `signal` tells an abort we asked for apart from a dropped connection.
 */
export function errorFromSdk(
  error: unknown,
  options: { signal: AbortSignal; secret?: string },
): ModelStreamError {
  if (options.signal.aborted) return abortedError();
  const shape = (typeof error === 'object' && error !== null ? error : {}) as SdkErrorShape;
  const message = redactSecret(shape.message || String(error), options.secret);
  // The Anthropic SDK names its errors; the OpenAI SDK leaves `name` as 'Error' but keeps class names.
  const kind =
    shape.name && shape.name !== 'Error' ? shape.name : (error as object | undefined)?.constructor?.name;
  if (kind === 'APIConnectionTimeoutError') {
    return { code: ErrorCodes.providerTimeout, message, retryable: true };
  }
  if (typeof shape.status === 'number') {
    return errorFromStatus(shape.status, message, { retryAfterMs: retryAfterFromHeaders(shape.headers) });
  }
  if (kind === 'APIError') {
    // An error event inside an otherwise successful (200) stream.
    const type = shape.type ?? shape.error?.type ?? shape.error?.error?.type;
    const code = type ? retryableErrorTypes[type] : undefined;
    if (code) return { code, message, retryable: true };
    return { code: ErrorCodes.providerError, message, retryable: false };
  }
  // Connection refused or reset, DNS failure, a body cut off mid-stream: the network, worth another try.
  return {
    code: ErrorCodes.providerUnavailable,
    message: `Could not reach the provider: ${message}`,
    retryable: true,
  };
}
