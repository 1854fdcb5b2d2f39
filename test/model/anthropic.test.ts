import { describe, expect, it } from 'vitest';
import { createAnthropicModel } from '../../src/model/anthropic.js';
import { completeModel, streamModel } from '../../src/model/call.js';
import { type FakeAnthropicServer, startFakeAnthropicServer } from '../helpers/fake-anthropic-server.js';
import { collect, noWait, hiRequest as request, useFakeServer } from './helpers.js';

describe('anthropic provider against a fake Messages server', () => {
  let server: FakeAnthropicServer;
  useFakeServer(startFakeAnthropicServer, (started) => {
    server = started;
  });

  const model = () =>
    createAnthropicModel({
      model: 'claude-sonnet-4-5',
      apiKey: 'sk-ant-secret-456',
      baseURL: server.baseURL,
    });

  it('streams text with usage from message_start and message_delta', async () => {
    server.respond({
      type: 'stream',
      text: ['Hel', 'lo'],
      usage: { inputTokens: 20, outputTokens: 4, cacheReadInputTokens: 5 },
    });
    const events = await collect(streamModel(model(), request));
    expect(events).toEqual([
      { type: 'text-delta', text: 'Hel' },
      { type: 'text-delta', text: 'lo' },
      { type: 'usage', usage: { inputTokens: 25, outputTokens: 4 } },
      { type: 'finish', stopReason: 'end_turn' },
    ]);
    expect(server.requests[0]!.path).toBe('/v1/messages');
    const headers = server.requests[0]!.headers;
    // SDK versions differ in the header they put the key in.
    expect(headers['x-api-key'] ?? headers.authorization).toMatch(/sk-ant-secret-456$/);
    expect(server.requests[0]!.body).toMatchObject({
      model: 'claude-sonnet-4-5',
      stream: true,
      max_tokens: 4096,
    });
  });

  it('assembles tool_use input from input_json_delta fragments and maps tool_use to tool_calls', async () => {
    server.respond({
      type: 'stream',
      text: ['Let me check.'],
      toolUses: [
        { id: 'toolu_1', name: 'search', jsonChunks: ['{"que', 'ry": "ts', ' agents"}'] },
        { id: 'toolu_2', name: 'noop', jsonChunks: [] },
      ],
    });
    const response = await completeModel(model(), {
      ...request,
      tools: [
        { name: 'search', description: 'search the web', inputSchema: { type: 'object', properties: {} } },
      ],
      toolChoice: 'required',
    });
    expect(response).toMatchObject({ text: 'Let me check.', stopReason: 'tool_calls' });
    expect(response.toolCalls).toEqual([
      { id: 'toolu_1', name: 'search', arguments: { query: 'ts agents' } },
      { id: 'toolu_2', name: 'noop', arguments: {} },
    ]);
    const body = server.requests[0]!.body;
    expect(body.tools[0]).toEqual({
      name: 'search',
      description: 'search the web',
      input_schema: { type: 'object', properties: {} },
    });
    expect(body.tool_choice).toEqual({ type: 'any' });
  });

  it.each([
    ['max_tokens', 'max_tokens'],
    ['stop_sequence', 'stop_sequence'],
    ['refusal', 'content_filter'],
    ['end_turn', 'end_turn'],
  ])('maps stop reason %s to %s', async (stopReason, expected) => {
    server.respond({ type: 'stream', text: ['x'], stopReason });
    const response = await completeModel(model(), request);
    expect(response.stopReason).toBe(expected);
  });

  it('sends system messages as `system` and tool results as user tool_result blocks', async () => {
    server.respond({ type: 'stream', text: ['done'] });
    await completeModel(model(), {
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Look up two things' },
        {
          role: 'assistant',
          content: '',
          toolCalls: [
            { id: 't1', name: 'search', arguments: { query: 'a' } },
            { id: 't2', name: 'search', arguments: { query: 'b' } },
          ],
        },
        { role: 'tool', toolCallId: 't1', toolName: 'search', content: 'A!' },
        { role: 'tool', toolCallId: 't2', toolName: 'search', content: 'failed', isError: true },
        { role: 'system', content: 'Recalled: the user likes tea.' },
      ],
    });
    const body = server.requests[0]!.body;
    expect(body.system).toBe('You are terse.\n\nRecalled: the user likes tea.');
    expect(body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Look up two things' }] },
      {
        role: 'assistant',
        content: [
          { type: 'tool_use', id: 't1', name: 'search', input: { query: 'a' } },
          { type: 'tool_use', id: 't2', name: 'search', input: { query: 'b' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 't1', content: 'A!' },
          { type: 'tool_result', tool_use_id: 't2', content: 'failed', is_error: true },
        ],
      },
    ]);
  });

  it('turns a mid-stream overloaded_error into a retryable error event after the text already sent', async () => {
    server.respond({
      type: 'stream',
      text: ['par'],
      errorAfterText: { type: 'overloaded_error', message: 'Overloaded' },
    });
    const events = await collect(streamModel(model(), request, { sleep: noWait }));
    expect(events).toEqual([
      { type: 'text-delta', text: 'par' },
      { type: 'error', error: expect.objectContaining({ code: 'PROVIDER_UNAVAILABLE', retryable: true }) },
    ]);
  });

  it('retries after a 429 and succeeds', async () => {
    server.respond(
      {
        type: 'http-error',
        status: 429,
        headers: { 'retry-after': '0' },
        body: { type: 'error', error: { type: 'rate_limit_error', message: 'slow' } },
      },
      { type: 'stream', text: ['fine'] },
    );
    const response = await completeModel(model(), request, { sleep: noWait });
    expect(response).toMatchObject({ text: 'fine', stopReason: 'end_turn' });
    expect(server.requests).toHaveLength(2);
  });

  it('times out and aborts', async () => {
    server.respond({ type: 'hang' }, { type: 'hang' });
    const timedOut = await completeModel(model(), request, { timeoutMs: 150, retry: { maxAttempts: 1 } });
    expect(timedOut.error?.code).toBe('PROVIDER_TIMEOUT');
    const controller = new AbortController();
    const pending = completeModel(model(), request, { signal: controller.signal });
    await server.waitForRequests(2);
    controller.abort();
    expect((await pending).stopReason).toBe('aborted');
  });
});
