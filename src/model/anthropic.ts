import type Anthropic from '@anthropic-ai/sdk';
import type {
  ContentBlockParam,
  MessageCreateParamsStreaming,
  MessageParam,
  RawMessageStreamEvent,
  ToolChoice,
} from '@anthropic-ai/sdk/resources/messages';
import { contextWindowFor } from './context-windows.js';
import { httpFetch } from './http-fetch.js';
import { mapUpstream } from './mapped-stream.js';
import { errorEvent, errorFromSdk } from './provider-errors.js';
import { lazySdkClient } from './sdk-client.js';
import type {
  LanguageModel,
  ModelCallOptions,
  ModelRequest,
  ModelStopReason,
  ModelStreamEvent,
} from './spec.js';
import { parseToolArguments } from './tool-arguments.js';

export const anthropicDefaultBaseUrl = 'https://api.anthropic.com';

/** The Messages API requires max_tokens; used when the request does not say. */
const defaultMaxTokens = 4096;

/** Options of `createAnthropicModel` (`anthropic/<model>` in config). */
export interface AnthropicModelOptions {
  model: string;
  apiKey: string;
  baseURL?: string;
  fetch?: typeof globalThis.fetch;
  headers?: Record<string, string>;
  contextWindowTokens?: number;
}

/**
 * The Messages API over the official `@anthropic-ai/sdk`, streaming, with tool use. SDK retries are off
 * (`streamModel` retries) and so is the SDK's own tracing (`streamModel` makes the GenAI span, and the SDK's
 * spans could carry prompt content). `temperature` is not sent: this API version has no sampling parameters.
 */
export function createAnthropicModel(options: AnthropicModelOptions): LanguageModel {
  const sdk = lazySdkClient(() =>
    import('@anthropic-ai/sdk').then(
      ({ default: AnthropicSdk }) =>
        new AnthropicSdk({
          apiKey: options.apiKey,
          baseURL: options.baseURL ?? anthropicDefaultBaseUrl,
          maxRetries: 0,
          openTelemetry: false,
          fetch: options.fetch ?? httpFetch,
          ...(options.headers ? { defaultHeaders: options.headers } : {}),
        }),
    ),
  );
  return {
    specificationVersion: 'v1',
    provider: 'anthropic',
    modelId: options.model,
    contextWindowTokens: options.contextWindowTokens ?? contextWindowFor(options.model),
    doStream: (request, callOptions) =>
      streamMessages(sdk.client, buildBody(options.model, request), callOptions, options.apiKey),
    prepare: sdk.prepare,
  };
}

function streamMessages(
  connect: () => Promise<Anthropic>,
  body: MessageCreateParamsStreaming,
  callOptions: ModelCallOptions,
  apiKey: string,
): AsyncIterableIterator<ModelStreamEvent> {
  const signal = callOptions.signal ?? new AbortController().signal;
  // tool_use blocks stream their input as JSON fragments, keyed by content block index.
  const toolBlocks = new Map<number, { id: string; name: string; json: string }>();
  let inputTokens = 0;
  let outputTokens = 0;
  let stopReason: string | null = null;
  let sawUsage = false;
  return mapUpstream<RawMessageStreamEvent>({
    open: async () => (await connect()).messages.create(body, { signal }),
    onItem(event, emit) {
      switch (event.type) {
        case 'message_start': {
          const usage = event.message.usage;
          // Cached prompt tokens are reported apart from input_tokens; all of them were read.
          inputTokens =
            usage.input_tokens +
            (usage.cache_creation_input_tokens ?? 0) +
            (usage.cache_read_input_tokens ?? 0);
          outputTokens = usage.output_tokens;
          sawUsage = true;
          break;
        }
        case 'content_block_start':
          if (event.content_block.type === 'tool_use') {
            toolBlocks.set(event.index, {
              id: event.content_block.id,
              name: event.content_block.name,
              json: '',
            });
          } else if (event.content_block.type === 'text' && event.content_block.text) {
            emit({ type: 'text-delta', text: event.content_block.text });
          }
          break;
        case 'content_block_delta':
          if (event.delta.type === 'text_delta') {
            emit({ type: 'text-delta', text: event.delta.text });
          } else if (event.delta.type === 'input_json_delta') {
            const block = toolBlocks.get(event.index);
            if (block) block.json += event.delta.partial_json;
          }
          break;
        case 'content_block_stop': {
          const block = toolBlocks.get(event.index);
          if (block) {
            toolBlocks.delete(event.index);
            emit({
              type: 'tool-call',
              toolCall: { id: block.id, name: block.name, arguments: parseToolArguments(block.json) },
            });
          }
          break;
        }
        case 'message_delta':
          if (event.delta.stop_reason) stopReason = event.delta.stop_reason;
          // message_delta carries cumulative counts.
          outputTokens = event.usage.output_tokens;
          if (event.usage.input_tokens) inputTokens = event.usage.input_tokens;
          sawUsage = true;
          break;
      }
    },
    onEnd(emit) {
      // The SDK ends the iteration quietly when the request is aborted.
      if (signal.aborted) {
        emit(errorEvent(errorFromSdk(undefined, { signal })));
        return;
      }
      if (sawUsage) emit({ type: 'usage', usage: { inputTokens, outputTokens } });
      emit({ type: 'finish', stopReason: mapStopReason(stopReason) });
    },
    onError: (error) => errorEvent(errorFromSdk(error, { signal, secret: apiKey })),
  });
}

function mapStopReason(reason: string | null): ModelStopReason {
  switch (reason) {
    case 'tool_use':
      return 'tool_calls';
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'max_tokens';
    case 'stop_sequence':
      return 'stop_sequence';
    case 'refusal':
      return 'content_filter';
    default:
      return 'end_turn';
  }
}

function buildBody(model: string, request: ModelRequest): MessageCreateParamsStreaming {
  const systemParts: string[] = [];
  const messages: MessageParam[] = [];
  // The API wants strictly alternating turns: consecutive same-role messages (a run of tool results, a
  // tool result followed by a user message) are merged into one message with several blocks.
  const append = (role: 'user' | 'assistant', blocks: ContentBlockParam[]) => {
    if (blocks.length === 0) return;
    const last = messages[messages.length - 1];
    if (last && last.role === role && Array.isArray(last.content))
      (last.content as ContentBlockParam[]).push(...blocks);
    else messages.push({ role, content: blocks } as MessageParam);
  };
  for (const message of request.messages) {
    switch (message.role) {
      case 'system':
        systemParts.push(message.content);
        break;
      case 'user':
        append('user', [{ type: 'text', text: message.content }]);
        break;
      case 'tool':
        append('user', [
          {
            type: 'tool_result',
            tool_use_id: message.toolCallId,
            content: message.content,
            ...(message.isError ? { is_error: true } : {}),
          },
        ]);
        break;
      case 'assistant': {
        const blocks: ContentBlockParam[] = [];
        if (message.content) blocks.push({ type: 'text', text: message.content });
        for (const call of message.toolCalls ?? []) {
          blocks.push({ type: 'tool_use', id: call.id, name: call.name, input: call.arguments });
        }
        append('assistant', blocks);
        break;
      }
    }
  }
  if (request.responseFormat) {
    // No JSON mode in the Messages API: ask for it in the system prompt.
    const schema = request.responseFormat.schema;
    systemParts.push(
      schema
        ? `Reply with only a JSON object that matches this JSON Schema, and nothing else:\n${JSON.stringify(schema)}`
        : 'Reply with only a JSON object, and nothing else.',
    );
  }
  const body: MessageCreateParamsStreaming = {
    model,
    max_tokens: request.maxTokens ?? defaultMaxTokens,
    messages,
    stream: true,
  };
  if (systemParts.length) body.system = systemParts.join('\n\n');
  if (request.tools?.length) {
    body.tools = request.tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      input_schema: { type: 'object', ...tool.inputSchema },
    }));
    if (request.toolChoice) body.tool_choice = toToolChoice(request.toolChoice);
  }
  return body;
}

function toToolChoice(choice: NonNullable<ModelRequest['toolChoice']>): ToolChoice {
  if (choice === 'auto') return { type: 'auto' };
  if (choice === 'none') return { type: 'none' };
  if (choice === 'required') return { type: 'any' };
  return { type: 'tool', name: choice.name };
}
