import {
  type RecordedRequest,
  type ScriptedHttpResponse,
  startScriptedHttpServer,
} from './fake-openai-server.js';

/** A loopback server speaking the Anthropic Messages streaming format (`event: …\ndata: …`). */

export interface FakeAnthropicToolUse {
  id: string;
  name: string;
  /** The input JSON text, cut into the `input_json_delta` pieces the server sends. */
  jsonChunks: string[];
}

export interface FakeAnthropicStream {
  text?: string[];
  toolUses?: FakeAnthropicToolUse[];
  /** Default `tool_use` when there are tool uses, else `end_turn`. */
  stopReason?: string;
  usage?: { inputTokens: number; outputTokens: number; cacheReadInputTokens?: number };
  /** After the text, send an `error` event (e.g. `overloaded_error`) instead of finishing. */
  errorAfterText?: { type: string; message: string };
  model?: string;
}

export function anthropicEvent(name: string, data: Record<string, unknown>): string {
  return `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
}

export function anthropicStreamFrames(stream: FakeAnthropicStream): string[] {
  const usage = stream.usage ?? { inputTokens: 13, outputTokens: 9 };
  const frames = [
    anthropicEvent('message_start', {
      message: {
        id: 'msg_fake',
        type: 'message',
        role: 'assistant',
        model: stream.model ?? 'claude-test',
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: {
          input_tokens: usage.inputTokens,
          cache_creation_input_tokens: 0,
          cache_read_input_tokens: usage.cacheReadInputTokens ?? 0,
          output_tokens: 1,
        },
      },
    }),
  ];
  let index = 0;
  if (stream.text?.length) {
    frames.push(anthropicEvent('content_block_start', { index, content_block: { type: 'text', text: '' } }));
    frames.push(anthropicEvent('ping', {}));
    for (const text of stream.text) {
      frames.push(anthropicEvent('content_block_delta', { index, delta: { type: 'text_delta', text } }));
    }
    if (stream.errorAfterText) {
      frames.push(
        `event: error\ndata: ${JSON.stringify({ type: 'error', error: stream.errorAfterText })}\n\n`,
      );
      return frames;
    }
    frames.push(anthropicEvent('content_block_stop', { index }));
    index++;
  }
  for (const tool of stream.toolUses ?? []) {
    frames.push(
      anthropicEvent('content_block_start', {
        index,
        content_block: { type: 'tool_use', id: tool.id, name: tool.name, input: {} },
      }),
    );
    for (const piece of tool.jsonChunks) {
      frames.push(
        anthropicEvent('content_block_delta', {
          index,
          delta: { type: 'input_json_delta', partial_json: piece },
        }),
      );
    }
    frames.push(anthropicEvent('content_block_stop', { index }));
    index++;
  }
  frames.push(
    anthropicEvent('message_delta', {
      delta: {
        stop_reason: stream.stopReason ?? (stream.toolUses?.length ? 'tool_use' : 'end_turn'),
        stop_sequence: null,
      },
      usage: { output_tokens: usage.outputTokens },
    }),
  );
  frames.push(anthropicEvent('message_stop', {}));
  return frames;
}

export type FakeAnthropicResponse = ({ type: 'stream' } & FakeAnthropicStream) | ScriptedHttpResponse;

export interface FakeAnthropicServer {
  /** Base URL for the SDK (it appends `/v1/messages`). */
  baseURL: string;
  requests: RecordedRequest[];
  respond(...responses: FakeAnthropicResponse[]): void;
  pendingResponses(): number;
  waitForRequests(count: number): Promise<void>;
  close(): Promise<void>;
}

export async function startFakeAnthropicServer(): Promise<FakeAnthropicServer> {
  const server = await startScriptedHttpServer();
  return {
    baseURL: server.origin,
    requests: server.requests,
    respond: (...responses) => {
      server.enqueue(
        ...responses.map(
          (response): ScriptedHttpResponse =>
            response.type === 'stream'
              ? { type: 'frames', frames: anthropicStreamFrames(response) }
              : response,
        ),
      );
    },
    pendingResponses: server.pendingResponses,
    waitForRequests: server.waitForRequests,
    close: server.close,
  };
}
