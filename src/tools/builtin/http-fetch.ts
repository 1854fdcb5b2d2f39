import { z } from 'zod';
import { ErrorCodes, UserInputError } from '../../util/index.js';
import { defineTool, type ToolDefinition } from '../tool.js';

export interface HttpFetchToolOptions {
  /** Host names the tool may reach: exact (`api.github.com`) or a subdomain wildcard (`*.example.com`). */
  allowedHosts: ReadonlyArray<string>;
  fetch?: typeof globalThis.fetch;
  timeoutMs?: number;
  maxResponseBytes?: number;
  maxRedirects?: number;
}

function hostAllowed(host: string, allowedHosts: ReadonlyArray<string>): boolean {
  const lower = host.toLowerCase();
  return allowedHosts.some((pattern) => {
    const wanted = pattern.toLowerCase();
    return wanted.startsWith('*.') ? lower.endsWith(wanted.slice(1)) : lower === wanted;
  });
}

/**
 * `http_fetch {url, method?, headers?, body?}`. Off unless configured, and then only to allowlisted hosts;
 * redirects are followed by hand so every hop is checked against the allowlist too.
 */
export function createHttpFetchTool(options: HttpFetchToolOptions): ToolDefinition {
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const timeoutMs = options.timeoutMs ?? 20_000;
  const maxResponseBytes = options.maxResponseBytes ?? 256 * 1024;
  const maxRedirects = options.maxRedirects ?? 5;

  const checkUrl = (raw: string): URL => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new UserInputError({
        code: ErrorCodes.invalidRequest,
        message: `"${raw}" is not an absolute URL.`,
      });
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new UserInputError({
        code: ErrorCodes.invalidRequest,
        message: `Only http and https URLs can be fetched, not ${url.protocol}`,
      });
    }
    if (!hostAllowed(url.hostname, options.allowedHosts)) {
      throw new UserInputError({
        code: ErrorCodes.forbidden,
        message: `Host ${url.hostname} is not in the http_fetch allowlist (${options.allowedHosts.join(', ') || 'empty'}).`,
      });
    }
    return url;
  };

  return defineTool({
    name: 'http_fetch',
    description: `Fetch a URL over HTTP(S). Allowed hosts: ${options.allowedHosts.join(', ') || '(none)'}. Returns status and body text.`,
    examples: [{ url: 'https://example.com/status', method: 'GET' }],
    input: z.object({
      url: z.string().min(1),
      method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD']).default('GET'),
      headers: z.record(z.string(), z.string()).optional(),
      body: z.string().optional(),
    }),
    policyResource: (args) => {
      try {
        return new URL(args.url).hostname;
      } catch {
        return undefined;
      }
    },
    async execute(args, context) {
      let url = checkUrl(args.url);
      const signal = AbortSignal.any([context.signal, AbortSignal.timeout(timeoutMs)]);
      let response: Response;
      let method: string = args.method;
      let body = args.body;
      for (let hop = 0; ; hop++) {
        response = await fetchImpl(url, { method, headers: args.headers, body, redirect: 'manual', signal });
        const location = response.headers.get('location');
        if (response.status < 300 || response.status >= 400 || !location) break;
        if (hop === maxRedirects)
          return { content: `Stopped after ${maxRedirects} redirects.`, isError: true };
        await response.body?.cancel();
        url = checkUrl(new URL(location, url).toString());
        if (
          response.status === 303 ||
          ((response.status === 301 || response.status === 302) && method === 'POST')
        ) {
          method = 'GET';
          body = undefined;
        }
      }
      const reader = response.body?.getReader();
      const chunks: Uint8Array[] = [];
      let received = 0;
      let cut = false;
      while (reader) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks.push(value);
        received += value.length;
        if (received > maxResponseBytes) {
          cut = true;
          await reader.cancel();
          break;
        }
      }
      const text = Buffer.concat(chunks).subarray(0, maxResponseBytes).toString('utf8');
      return {
        content: `status: ${response.status}\ncontent-type: ${response.headers.get('content-type') ?? ''}\n\n${text}${cut ? `\n[… cut at ${maxResponseBytes} bytes]` : ''}`,
        isError: response.status >= 400,
      };
    },
  });
}
