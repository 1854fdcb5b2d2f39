import { describe, expect, it } from 'vitest';
import { completeModel, streamModel } from '../../src/model/call.js';
import { createOpenAIModel } from '../../src/model/openai.js';
import type { ModelMessage } from '../../src/model/spec.js';
import { deepFreeze } from '../../src/util/index.js';
import {
  type FakeOpenAIServer,
  openAIChunk,
  sseData,
  startFakeOpenAIServer,
} from '../helpers/fake-openai-server.js';
import { collect, noWait, hiRequest as request, useFakeServer } from './helpers.js';

describe('openai provider against a fake Chat Completions server', () => {
  let server: FakeOpenAIServer;
  useFakeServer(startFakeOpenAIServer, (started) => {
    server = started;
  });

  const model = () =>
    createOpenAIModel({ model: 'gpt-4o-mini', apiKey: 'sk-test-secret-123', baseURL: server.baseURL });

  it('streams text deltas, usage and finish, and sends include_usage', async () => {
    server.respond({
      type: 'stream',
      text: ['Hel', 'lo', ' there'],
      usage: { promptTokens: 5, completionTokens: 3 },
    });
    const events = await collect(streamModel(model(), request));
    expect(events).toEqual([
      { type: 'text-delta', text: 'Hel' },
      { type: 'text-delta', text: 'lo' },
      { type: 'text-delta', text: ' there' },
      { type: 'usage', usage: { inputTokens: 5, outputTokens: 3 } },
      { type: 'finish', stopReason: 'end_turn' },
    ]);
    const body = server.requests[0]!.body;
    expect(server.requests[0]!.path).toBe('/v1/chat/completions');
    expect(body.stream).toBe(true);
    expect(body.stream_options).toEqual({ include_usage: true });
    expect(body.messages).toEqual([{ role: 'user', content: 'Hi' }]);
    expect(server.requests[0]!.headers.authorization).toBe('Bearer sk-test-secret-123');
  });

  it('assembles tool calls from argument fragments split across chunks', async () => {
    server.respond({
      type: 'stream',
      toolCalls: [
        { id: 'call_a', name: 'get_weather', argumentChunks: ['{"ci', 'ty": "Par', 'is"}'] },
        { id: 'call_b', name: 'broken', argumentChunks: ['{"x": ', 'tru'] },
      ],
    });
    const response = await completeModel(model(), {
      ...request,
      tools: [{ name: 'get_weather', description: 'weather', inputSchema: { type: 'object' } }],
      toolChoice: { name: 'get_weather' },
    });
    expect(response.stopReason).toBe('tool_calls');
    expect(response.toolCalls).toEqual([
      { id: 'call_a', name: 'get_weather', arguments: { city: 'Paris' } },
      { id: 'call_b', name: 'broken', arguments: { __raw: '{"x": tru' } },
    ]);
    const body = server.requests[0]!.body;
    expect(body.tools[0]).toEqual({
      type: 'function',
      function: { name: 'get_weather', description: 'weather', parameters: { type: 'object' } },
    });
    expect(body.tool_choice).toEqual({ type: 'function', function: { name: 'get_weather' } });
  });

  it('maps finish reasons and sends assistant tool calls and tool results back', async () => {
    server.respond({ type: 'stream', text: ['cut'], finishReason: 'length' });
    const response = await completeModel(model(), {
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'weather?' },
        {
          role: 'assistant',
          content: '',
          toolCalls: [{ id: 'c1', name: 'get_weather', arguments: { city: 'Oslo' } }],
        },
        { role: 'tool', toolCallId: 'c1', toolName: 'get_weather', content: 'rain', isError: false },
      ],
      maxTokens: 50,
    });
    expect(response.stopReason).toBe('max_tokens');
    const body = server.requests[0]!.body;
    expect(body.messages[2]).toEqual({
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
      ],
    });
    expect(body.messages[3]).toEqual({ role: 'tool', tool_call_id: 'c1', content: 'rain' });
    // A custom base URL is treated as an OpenAI-compatible server, which knows max_tokens.
    expect(body.max_tokens).toBe(50);
  });

  it('sends the body the SDK would encode, and encodes again what was not frozen when it changed', async () => {
    const tool = Object.freeze({
      name: 'lookup',
      description: 'looks "things" up',
      inputSchema: Object.freeze({
        type: 'object',
        properties: Object.freeze({ q: Object.freeze({ type: 'string' }) }),
      }),
    });
    const openTool = {
      name: 'note',
      description: 'notes',
      inputSchema: { type: 'object' } as Record<string, unknown>,
    };
    const tools = Object.freeze([tool, openTool]);
    const history: ModelMessage = deepFreeze({
      role: 'assistant',
      content: '',
      toolCalls: [{ id: 'c1', name: 'lookup', arguments: { q: 'x\n"y"' } }],
    });
    const open = { role: 'user' as const, content: 'first' };
    let system = 'line one\nline "two"';
    const sent = () =>
      completeModel(model(), {
        messages: [{ role: 'system', content: system }, history, open],
        tools,
        toolChoice: 'required',
        maxTokens: 64,
        temperature: 0.5,
        responseFormat: { type: 'json', schema: { type: 'object' }, name: 'answer' },
      });
    server.respond({ type: 'stream', text: ['a'] });
    server.respond({ type: 'stream', text: ['b'] });
    server.respond({ type: 'stream', text: ['c'] });
    await sent();
    open.content = 'second';
    openTool.inputSchema = { type: 'object', properties: { text: { type: 'string' } } };
    await sent();
    system = 'line three';
    await sent();
    const expected = (
      content: string,
      noteSchema: Record<string, unknown>,
      systemText = 'line one\nline "two"',
    ) =>
      JSON.stringify({
        model: 'gpt-4o-mini',
        messages: [
          { role: 'system', content: systemText },
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'c1', type: 'function', function: { name: 'lookup', arguments: '{"q":"x\\n\\"y\\""}' } },
            ],
          },
          { role: 'user', content },
        ],
        stream: true,
        stream_options: { include_usage: true },
        tools: [
          {
            type: 'function',
            function: { name: 'lookup', description: 'looks "things" up', parameters: tool.inputSchema },
          },
          { type: 'function', function: { name: 'note', description: 'notes', parameters: noteSchema } },
        ],
        tool_choice: 'required',
        max_tokens: 64,
        temperature: 0.5,
        response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object' } } },
      });
    expect(server.requests[0]!.text).toBe(expected('first', { type: 'object' }));
    expect(server.requests[1]!.text).toBe(
      expected('second', { type: 'object', properties: { text: { type: 'string' } } }),
    );
    expect(server.requests[2]!.text).toBe(
      expected('second', { type: 'object', properties: { text: { type: 'string' } } }, 'line three'),
    );
    expect(server.requests[1]!.headers['content-type']).toBe('application/json');
  });

  it('ends with a stream error when the server sends an error mid-stream, after the text it sent', async () => {
    server.respond({
      type: 'stream',
      text: ['partial'],
      errorAfterText: { message: 'boom', type: 'server_error' },
    });
    const events = await collect(streamModel(model(), request, { sleep: noWait }));
    expect(events[0]).toEqual({ type: 'text-delta', text: 'partial' });
    expect(events).toHaveLength(2);
    expect(events[1]).toMatchObject({
      type: 'error',
      error: { code: 'PROVIDER_UNAVAILABLE', retryable: true },
    });
  });

  it('ends with PROVIDER_ERROR, at once, when a hostile server sends chunks of the wrong shape', async () => {
    const chunk = (delta: Record<string, unknown>) => sseData(openAIChunk(delta));
    const hostile: Record<string, string> = {
      // A sparse index of a billion would have the provider walk a billion empty slots.
      'a tool call index of a billion': chunk({
        tool_calls: [{ index: 1e9, id: 'x', function: { name: 'f' } }],
      }),
      'a negative tool call index': chunk({ tool_calls: [{ index: -1, function: { name: 'f' } }] }),
      'tool calls that are not a list': chunk({ tool_calls: 5 }),
      'choices that are not a list': 'data: {"choices":{"0":{}}}\n\n',
      'a chunk that is not an object': 'data: 42\n\n',
      'a chunk that is not JSON': 'data: {"choices": [\n\n',
    };
    for (const [name, frame] of Object.entries(hostile)) {
      server.respond({ type: 'frames', frames: [chunk({ content: 'fine' }), frame, 'data: [DONE]\n\n'] });
      const events = await collect(streamModel(model(), request, { sleep: noWait }));
      expect(events[0], name).toEqual({ type: 'text-delta', text: 'fine' });
      expect(events.at(-1), name).toMatchObject({
        type: 'error',
        error: { code: 'PROVIDER_ERROR', retryable: false, message: expect.stringContaining('malformed') },
      });
    }
  });

  it('reads each answer to its end, so one kept-alive connection serves the calls one after another', async () => {
    const ports: number[] = [];
    for (let call = 0; call < 3; call++)
      server.respond({
        type: 'handler',
        handle: (incoming, response) => {
          ports.push(incoming.socket.remotePort!);
          response.writeHead(200, { 'content-type': 'text/event-stream' });
          // Bytes after [DONE] (a comment) are read too: the body is drained, not dropped.
          response.end(
            'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n: done\n\n',
          );
        },
      });
    const answers = [];
    for (let call = 0; call < 3; call++) answers.push((await completeModel(model(), request)).text);
    expect(answers).toEqual(['hi', 'hi', 'hi']);
    expect(new Set(ports).size).toBe(1);
  });

  it('retries after a 429 and yields the successful stream once', async () => {
    server.respond(
      { type: 'http-error', status: 429, body: { error: { message: 'slow down', type: 'rate_limit' } } },
      { type: 'stream', text: ['ok'] },
    );
    const delays: number[] = [];
    const response = await completeModel(model(), request, {
      sleep: async (ms) => {
        delays.push(ms);
      },
      random: () => 0,
      retry: { initialDelayMs: 100 },
    });
    expect(response).toMatchObject({ text: 'ok', stopReason: 'end_turn' });
    expect(server.requests).toHaveLength(2);
    expect(delays).toEqual([50]);
  });

  it('gives up after maxAttempts with the last error and no secret in the message', async () => {
    server.respond(
      { type: 'http-error', status: 503, body: { error: { message: 'down for sk-test-secret-123' } } },
      { type: 'http-error', status: 503, body: { error: { message: 'down for sk-test-secret-123' } } },
    );
    const response = await completeModel(model(), request, { sleep: noWait, retry: { maxAttempts: 2 } });
    expect(response.stopReason).toBe('error');
    expect(response.error).toMatchObject({ code: 'PROVIDER_UNAVAILABLE', statusCode: 503, retryable: true });
    expect(response.error!.message).not.toContain('sk-test-secret-123');
  });

  it('does not retry authentication failures', async () => {
    server.respond({ type: 'http-error', status: 401, body: { error: { message: 'bad key' } } });
    const response = await completeModel(model(), request, { sleep: noWait });
    expect(response.error).toMatchObject({ code: 'PROVIDER_AUTH', retryable: false });
    expect(server.requests).toHaveLength(1);
  });

  it('times out a hanging server with PROVIDER_TIMEOUT', async () => {
    server.respond({ type: 'hang' });
    const events = await collect(
      streamModel(model(), request, { timeoutMs: 200, retry: { maxAttempts: 1 } }),
    );
    expect(events).toEqual([{ type: 'error', error: expect.objectContaining({ code: 'PROVIDER_TIMEOUT' }) }]);
  });

  it('aborts a hanging call through the signal with ABORTED and stopReason aborted', async () => {
    server.respond({ type: 'hang' });
    const controller = new AbortController();
    const pending = completeModel(model(), request, { signal: controller.signal });
    await server.waitForRequests(1);
    controller.abort();
    const response = await pending;
    expect(response.stopReason).toBe('aborted');
    expect(response.error).toMatchObject({ code: 'ABORTED', retryable: false });
  });

  it('reports an unreachable server as a retryable network error', async () => {
    const unreachable = createOpenAIModel({ model: 'x', baseURL: 'http://127.0.0.1:9/v1' });
    const response = await completeModel(unreachable, request, { sleep: noWait, retry: { maxAttempts: 2 } });
    expect(response.error).toMatchObject({ code: 'PROVIDER_UNAVAILABLE', retryable: true });
  });
});
