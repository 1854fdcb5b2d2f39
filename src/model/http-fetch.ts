/**
 * The providers' HTTP transport: the part of the Fetch API the SDKs use, on `node:http` and `node:https` with
 * keep-alive agents. Node's own fetch (undici) made a web stream, a Request, abort signals and their
 * transferable wrappers for every model call: about a fifth of a provider turn's CPU at one client
 * (bench/results/openclaw.md). The answer's body here is the response stream itself, which the SDKs read
 * as an async iterable of bytes.
 *
 * Bodies other than text and bytes (form data, blobs, streams: uploads, which no model call sends) and
 * `Request` objects go to the global fetch unchanged.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Readable } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';

/** Up to this many redirects are followed, as by fetch. */
const maxRedirects = 20;

const agents = {
  http: new HttpAgent({ keepAlive: true }),
  https: new HttpsAgent({ keepAlive: true }),
};

/** What the SDKs read of an answer: status, headers, and the body as a stream, as whole text or as JSON. */
class StreamedResponse {
  readonly ok: boolean;
  readonly status: number;
  readonly statusText: string;
  readonly headers: Headers;
  readonly redirected: boolean;

  constructor(
    readonly url: string,
    message: IncomingMessage,
    readonly body: Readable,
    redirects: number,
  ) {
    this.status = message.statusCode ?? 0;
    this.ok = this.status >= 200 && this.status < 300;
    this.statusText = message.statusMessage ?? '';
    this.redirected = redirects > 0;
    const headers = new Headers();
    const raw = message.rawHeaders;
    for (let index = 0; index < raw.length; index += 2) headers.append(raw[index]!, raw[index + 1]!);
    this.headers = headers;
  }

  async text(): Promise<string> {
    let text = '';
    const decoder = new TextDecoder();
    for await (const chunk of this.body) text += decoder.decode(chunk as Uint8Array, { stream: true });
    return text + decoder.decode();
  }

  async json(): Promise<unknown> {
    return JSON.parse(await this.text());
  }
}

/** The error fetch rejects with when its signal aborts: the signal's reason, else an `AbortError`. */
function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

function headerRecord(headers: RequestInit['headers']): Record<string, string> {
  const record: Record<string, string> = {};
  if (!headers) return record;
  if (headers instanceof Headers || Array.isArray(headers)) {
    for (const [name, value] of headers) record[name] = value;
    return record;
  }
  for (const [name, value] of Object.entries(headers as Record<string, string | undefined>))
    if (value !== undefined && value !== null) record[name] = String(value);
  return record;
}

/** The body stream a `content-encoding` calls for, decoded as fetch decodes it. */
function decoded(message: IncomingMessage): Readable {
  const encoding = message.headers['content-encoding']?.trim().toLowerCase();
  const decoder =
    encoding === 'gzip' || encoding === 'x-gzip'
      ? createGunzip()
      : encoding === 'deflate'
        ? createInflate()
        : encoding === 'br'
          ? createBrotliDecompress()
          : undefined;
  if (!decoder) return message;
  message.on('error', (error) => decoder.destroy(error));
  return message.pipe(decoder);
}

/**
 * `fetch` for the providers' SDKs (their `fetch` option): the same promise of a response, resolved when the
 * headers arrive, rejected with an `AbortError` when `init.signal` aborts before them and with a `TypeError`
 * whose `cause` is the socket's error when the request fails; an abort after the headers ends the body with
 * the abort's error. Redirects are followed as fetch follows them.
 */
export const httpFetch: typeof fetch = (input, init) => {
  const body = init?.body;
  // A Request carries its own method, headers and body; the SDKs pass a URL string.
  if (
    (typeof input !== 'string' && !(input instanceof URL)) ||
    (body !== undefined && body !== null && typeof body !== 'string' && !(body instanceof Uint8Array))
  )
    return fetch(input, init);
  const url = typeof input === 'string' ? input : input.href;
  let target: URL;
  try {
    target = new URL(url);
  } catch (error) {
    return Promise.reject(new TypeError(`Failed to parse URL from ${url}`, { cause: error }));
  }
  return send(
    target,
    (init?.method ?? 'GET').toUpperCase(),
    headerRecord(init?.headers),
    body ?? undefined,
    init?.signal ?? undefined,
    0,
  ) as unknown as Promise<Response>;
};

function send(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: string | Uint8Array | undefined,
  signal: AbortSignal | undefined,
  redirects: number,
): Promise<StreamedResponse> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const secure = url.protocol === 'https:';
    if (!secure && url.protocol !== 'http:')
      return reject(new TypeError(`fetch failed: unsupported protocol ${url.protocol}`));
    const request = (secure ? httpsRequest : httpRequest)(url, {
      method,
      headers,
      agent: secure ? agents.https : agents.http,
    });
    let settled = false;
    let answer: Readable | undefined;
    const onAbort = () => {
      const reason = abortReason(signal!);
      if (answer) answer.destroy(reason as Error);
      request.destroy();
      if (!settled) {
        settled = true;
        reject(reason);
      }
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const release = () => signal?.removeEventListener('abort', onAbort);
    request.once('error', (error) => {
      release();
      if (settled) return;
      settled = true;
      reject(new TypeError('fetch failed', { cause: error }));
    });
    request.once('response', (message) => {
      const status = message.statusCode ?? 0;
      const location = message.headers.location;
      if (location && [301, 302, 303, 307, 308].includes(status)) {
        message.resume();
        release();
        settled = true;
        if (redirects >= maxRedirects) return reject(new TypeError('fetch failed: redirect count exceeded'));
        // As fetch: a 303, or a 301/302 answering a POST, is followed with a GET and no body.
        const asGet = status === 303 || ((status === 301 || status === 302) && method === 'POST');
        const next = new URL(location, url);
        const nextHeaders = { ...headers };
        if (asGet) {
          for (const name of Object.keys(nextHeaders))
            if (/^content-(type|length|encoding|language|location)$/i.test(name)) delete nextHeaders[name];
        }
        if (next.origin !== url.origin) {
          for (const name of Object.keys(nextHeaders))
            if (/^(authorization|cookie|proxy-authorization)$/i.test(name)) delete nextHeaders[name];
        }
        send(next, asGet ? 'GET' : method, nextHeaders, asGet ? undefined : body, signal, redirects + 1).then(
          resolve,
          reject,
        );
        return;
      }
      settled = true;
      answer = decoded(message);
      // The body ends with the abort's error when the signal aborts after the headers; the listener goes
      // when the body ends either way.
      answer.once('close', release);
      resolve(new StreamedResponse(url.href, message, answer, redirects));
    });
    request.end(body);
  });
}
