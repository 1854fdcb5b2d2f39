import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Loopback HTTP servers that speak the providers' real SSE wire formats, so the official SDKs run their
 * own parsing code in tests. Responses are scripted per request, in order; an unscripted request gets a
 * 500 and is recorded, so a test that makes an extra call fails loudly.
 */

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON body (or the raw text when it is not JSON). */
  body: any;
  /** The body as it arrived. */
  text: string;
}

export type ScriptedHttpResponse =
  /** A status code with a JSON body, e.g. 429 then success. */
  | { type: 'http-error'; status: number; body?: unknown; headers?: Record<string, string> }
  /** Sends 200 and SSE headers, then nothing until the client goes away (for timeouts and abort). */
  | { type: 'hang' }
  /** Writes these SSE frames one `write` each, then ends (or drops the socket when `drop` is set). */
  | { type: 'frames'; frames: string[]; drop?: boolean }
  /** Full control, e.g. for benchmarks that timestamp each chunk. */
  | {
      type: 'handler';
      handle: (request: IncomingMessage, response: ServerResponse, body: any) => void | Promise<void>;
    };

export interface ScriptedHttpServer {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  requests: RecordedRequest[];
  enqueue(...responses: ScriptedHttpResponse[]): void;
  /** Scripted responses not yet used. */
  pendingResponses(): number;
  /** Resolves once `count` requests have arrived in total. */
  waitForRequests(count: number): Promise<void>;
  close(): Promise<void>;
}

export async function startScriptedHttpServer(): Promise<ScriptedHttpServer> {
  const queue: ScriptedHttpResponse[] = [];
  const requests: RecordedRequest[] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // Keep the raw text.
    }
    requests.push({
      method: request.method ?? '',
      path: request.url ?? '',
      headers: request.headers,
      body,
      text,
    });
    for (const waiter of waiters.filter((entry) => requests.length >= entry.count)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
    const scripted = queue.shift();
    if (!scripted) {
      response.writeHead(500, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({ error: { message: 'fake server: no scripted response left', type: 'test_error' } }),
      );
      return;
    }
    await serve(scripted, request, response, body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    enqueue: (...responses) => {
      queue.push(...responses);
    },
    pendingResponses: () => queue.length,
    waitForRequests: (count) =>
      requests.length >= count
        ? Promise.resolve()
        : new Promise((resolve) => waiters.push({ count, resolve })),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function serve(
  scripted: ScriptedHttpResponse,
  request: IncomingMessage,
  response: ServerResponse,
  body: unknown,
): Promise<void> {
  switch (scripted.type) {
    case 'http-error':
      response.writeHead(scripted.status, { 'content-type': 'application/json', ...scripted.headers });
      response.end(JSON.stringify(scripted.body ?? { error: { message: `status ${scripted.status}` } }));
      return;
    case 'hang':
      response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      response.flushHeaders();
      return;
    case 'frames':
      response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      for (const frame of scripted.frames) response.write(frame);
      if (scripted.drop) response.destroy();
      else response.end();
      return;
    case 'handler':
      await scripted.handle(request, response, body);
      return;
  }
}

// --- OpenAI Chat Completions ---------------------------------------------------------------------------

export interface FakeOpenAIToolCall {
  id: string;
  name: string;
  /** The arguments JSON text, cut into the pieces the server sends one chunk each. */
  argumentChunks: string[];
}

export interface FakeOpenAIStream {
  /** Text deltas, one chunk each. */
  text?: string[];
  toolCalls?: FakeOpenAIToolCall[];
  /** Default `tool_calls` when there are tool calls, else `stop`; `null` sends no finish chunk. */
  finishReason?: string | null;
  /** Sent as the last chunk (as with `stream_options.include_usage`); `null` sends none. */
  usage?: { promptTokens: number; completionTokens: number } | null;
  /** After the text chunks, send an error object instead of finishing (as OpenAI does mid-stream). */
  errorAfterText?: { message: string; type?: string };
  model?: string;
}

export function sseData(data: unknown): string {
  return `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
}

export function openAIChunk(
  delta: Record<string, unknown>,
  finishReason: string | null = null,
  model = 'gpt-test',
): Record<string, unknown> {
  return {
    id: 'chatcmpl-fake',
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
  };
}

/** The SSE frames OpenAI sends for a streamed chat completion. */
export function openAIStreamFrames(stream: FakeOpenAIStream): string[] {
  const model = stream.model ?? 'gpt-test';
  const frames = [sseData(openAIChunk({ role: 'assistant', content: '' }, null, model))];
  for (const text of stream.text ?? []) frames.push(sseData(openAIChunk({ content: text }, null, model)));
  if (stream.errorAfterText) {
    frames.push(
      sseData({
        error: { message: stream.errorAfterText.message, type: stream.errorAfterText.type ?? 'server_error' },
      }),
    );
    return frames;
  }
  (stream.toolCalls ?? []).forEach((call, index) => {
    frames.push(
      sseData(
        openAIChunk(
          {
            tool_calls: [
              { index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } },
            ],
          },
          null,
          model,
        ),
      ),
    );
    for (const piece of call.argumentChunks) {
      frames.push(
        sseData(openAIChunk({ tool_calls: [{ index, function: { arguments: piece } }] }, null, model)),
      );
    }
  });
  const finish =
    stream.finishReason === undefined
      ? stream.toolCalls?.length
        ? 'tool_calls'
        : 'stop'
      : stream.finishReason;
  if (finish !== null) frames.push(sseData(openAIChunk({}, finish, model)));
  const usage = stream.usage === undefined ? { promptTokens: 11, completionTokens: 7 } : stream.usage;
  if (usage) {
    frames.push(
      sseData({
        id: 'chatcmpl-fake',
        object: 'chat.completion.chunk',
        created: 1_700_000_000,
        model,
        choices: [],
        usage: {
          prompt_tokens: usage.promptTokens,
          completion_tokens: usage.completionTokens,
          total_tokens: usage.promptTokens + usage.completionTokens,
        },
      }),
    );
  }
  frames.push(sseData('[DONE]'));
  return frames;
}

export type FakeOpenAIResponse = ({ type: 'stream' } & FakeOpenAIStream) | ScriptedHttpResponse;

export interface FakeOpenAIServer {
  /** Base URL for the SDK, ending in `/v1`. */
  baseURL: string;
  requests: RecordedRequest[];
  respond(...responses: FakeOpenAIResponse[]): void;
  pendingResponses(): number;
  waitForRequests(count: number): Promise<void>;
  close(): Promise<void>;
}

export async function startFakeOpenAIServer(): Promise<FakeOpenAIServer> {
  const server = await startScriptedHttpServer();
  return {
    baseURL: `${server.origin}/v1`,
    requests: server.requests,
    respond: (...responses) => {
      server.enqueue(
        ...responses.map(
          (response): ScriptedHttpResponse =>
            response.type === 'stream' ? { type: 'frames', frames: openAIStreamFrames(response) } : response,
        ),
      );
    },
    pendingResponses: server.pendingResponses,
    waitForRequests: server.waitForRequests,
    close: server.close,
  };
}
