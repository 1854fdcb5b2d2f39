import type OpenAI from 'openai';
import type {
  ChatCompletionChunk,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
  ChatCompletionToolChoiceOption,
} from 'openai/resources/chat/completions';
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
  ModelToolCall,
} from './spec.js';
import { parseToolArguments } from './tool-arguments.js';

export const openAIDefaultBaseUrl = 'https://api.openai.com/v1';

/**
 * Options of `createOpenAIModel` (`openai/<model>` and `ollama/<model>` in config, or any OpenAI-compatible server).
 */
export interface OpenAIModelOptions {
  /** The model id the server knows (`gpt-4o-mini`, `llama3.2`, …). */
  model: string;
  /** Optional for OpenAI-compatible servers that need none (Ollama, llama.cpp, vLLM without auth). */
  apiKey?: string;
  /** Defaults to the official API. Never read from the environment here; `resolveModel` does that. */
  baseURL?: string;
  /** Reported as `LanguageModel.provider`: `openai`, or `ollama` for the shorthand. */
  provider?: string;
  fetch?: typeof globalThis.fetch;
  headers?: Record<string, string>;
  contextWindowTokens?: number;
}

/**
 * Chat Completions over the official `openai` SDK, streaming, with tool calls. Works against every
 * OpenAI-compatible server. The SDK's own retries are off: `streamModel` retries, and only while nothing
 * has reached the caller.
 */
export function createOpenAIModel(options: OpenAIModelOptions): LanguageModel {
  const baseURL = options.baseURL ?? openAIDefaultBaseUrl;
  const official = baseURL.replace(/\/+$/, '') === openAIDefaultBaseUrl;
  const sdk = lazySdkClient(() =>
    import('openai').then(
      ({ default: OpenAISdk }) =>
        new OpenAISdk({
          // The SDK refuses to start without a key; compatible servers without auth ignore this placeholder.
          apiKey: options.apiKey || 'not-needed',
          baseURL,
          organization: null,
          project: null,
          maxRetries: 0,
          fetch: options.fetch ?? httpFetch,
          ...(options.headers ? { defaultHeaders: options.headers } : {}),
        }),
    ),
  );
  const provider = options.provider ?? 'openai';
  return {
    specificationVersion: 'v1',
    provider,
    modelId: options.model,
    contextWindowTokens: options.contextWindowTokens ?? contextWindowFor(options.model),
    doStream: (request, callOptions) =>
      streamChatCompletion(
        sdk.client,
        buildBody(options.model, request, official),
        callOptions,
        options.apiKey,
      ),
    prepare: sdk.prepare,
  };
}

function streamChatCompletion(
  connect: () => Promise<OpenAI>,
  body: ChatCompletionCreateParamsStreaming,
  callOptions: ModelCallOptions,
  apiKey: string | undefined,
): AsyncIterableIterator<ModelStreamEvent> {
  const signal = callOptions.signal ?? new AbortController().signal;
  // Tool calls arrive as fragments keyed by `index`: the id and name first, then argument pieces.
  const pending: Array<{ id: string; name: string; arguments: string }> = [];
  let finishReason: string | null = null;
  let usage: ChatCompletionChunk['usage'];
  let toolCallsSent = false;
  return mapUpstream<ChatCompletionChunk>({
    open: async () => (await connect()).chat.completions.create(body, { signal }),
    onItem(chunk, emit) {
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices[0];
      if (choice === undefined) return;
      const delta = choice.delta;
      if (delta?.content) emit({ type: 'text-delta', text: delta.content });
      if (delta?.tool_calls) {
        for (const fragment of delta.tool_calls) {
          let slot = pending[fragment.index];
          if (!slot) {
            slot = { id: '', name: '', arguments: '' };
            pending[fragment.index] = slot;
          }
          if (fragment.id) slot.id = fragment.id;
          if (fragment.function?.name) slot.name += fragment.function.name;
          if (fragment.function?.arguments) slot.arguments += fragment.function.arguments;
        }
      }
      if (choice.finish_reason) {
        finishReason = choice.finish_reason;
        // Usage (if asked for) follows in a last chunk without choices; the calls are complete now.
        emitToolCalls(pending, emit);
        toolCallsSent = true;
      }
    },
    onEnd(emit) {
      // The SDK ends the iteration quietly when the request is aborted.
      if (signal.aborted) {
        emit(errorEvent(errorFromSdk(undefined, { signal })));
        return;
      }
      if (!toolCallsSent) emitToolCalls(pending, emit);
      if (usage) {
        emit({
          type: 'usage',
          usage: { inputTokens: usage.prompt_tokens ?? 0, outputTokens: usage.completion_tokens ?? 0 },
        });
      }
      emit({ type: 'finish', stopReason: mapFinishReason(finishReason, pending.length > 0) });
    },
    onError: (error) => errorEvent(errorFromSdk(error, { signal, secret: apiKey })),
  });
}

function emitToolCalls(
  pending: Array<{ id: string; name: string; arguments: string }>,
  emit: (event: ModelStreamEvent) => void,
): void {
  for (let index = 0; index < pending.length; index++) {
    const slot = pending[index];
    if (!slot) continue;
    const toolCall: ModelToolCall = {
      // Some compatible servers omit ids; results are matched by id, so make one up that is unique per turn.
      id: slot.id || `call_${index}`,
      name: slot.name,
      arguments: parseToolArguments(slot.arguments),
    };
    emit({ type: 'tool-call', toolCall });
  }
}

/** Compatible servers sometimes end without a finish_reason; a stream with tool calls then still means tool_calls. */
function mapFinishReason(reason: string | null, hadToolCalls: boolean): ModelStopReason {
  switch (reason) {
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
    case 'function_call':
      return 'tool_calls';
    case 'content_filter':
      return 'content_filter';
    case 'stop':
      return 'end_turn';
    default:
      return hadToolCalls ? 'tool_calls' : 'end_turn';
  }
}

function buildBody(
  model: string,
  request: ModelRequest,
  official: boolean,
): ChatCompletionCreateParamsStreaming {
  const body: ChatCompletionCreateParamsStreaming = {
    model,
    messages: request.messages.map(toOpenAIMessage),
    stream: true,
    stream_options: { include_usage: true },
  };
  if (request.tools?.length) {
    body.tools = request.tools.map((tool) => ({
      type: 'function',
      function: { name: tool.name, description: tool.description, parameters: tool.inputSchema },
    }));
    if (request.toolChoice) body.tool_choice = toToolChoice(request.toolChoice);
  }
  if (request.maxTokens !== undefined) {
    // The official API wants max_completion_tokens (reasoning models reject max_tokens); most compatible
    // servers only know max_tokens.
    if (official) body.max_completion_tokens = request.maxTokens;
    else body.max_tokens = request.maxTokens;
  }
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.responseFormat) {
    body.response_format = request.responseFormat.schema
      ? {
          type: 'json_schema',
          json_schema: {
            name: request.responseFormat.name ?? 'response',
            schema: request.responseFormat.schema,
          },
        }
      : { type: 'json_object' };
  }
  return body;
}

function toToolChoice(choice: NonNullable<ModelRequest['toolChoice']>): ChatCompletionToolChoiceOption {
  return typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } };
}

function toOpenAIMessage(message: ModelRequest['messages'][number]): ChatCompletionMessageParam {
  switch (message.role) {
    case 'system':
      return { role: 'system', content: message.content };
    case 'user':
      return { role: 'user', content: message.content };
    case 'tool':
      return {
        role: 'tool',
        tool_call_id: message.toolCallId,
        content: message.isError ? `Error: ${message.content}` : message.content,
      };
    case 'assistant':
      if (!message.toolCalls?.length) return { role: 'assistant', content: message.content };
      return {
        role: 'assistant',
        content: message.content || null,
        tool_calls: message.toolCalls.map((call) => ({
          id: call.id,
          type: 'function',
          function: { name: call.name, arguments: JSON.stringify(call.arguments) },
        })),
      };
  }
}
