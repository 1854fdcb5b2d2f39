import type { APIError, default as OpenAI } from 'openai';
import type {
  ChatCompletionChunk,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
  ChatCompletionTool,
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
  ModelToolDefinition,
} from './spec.js';
import { EventTooLongError, serverSentEvents } from './sse.js';
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
    import('openai').then(({ default: OpenAISdk, APIError }) => ({
      client: new OpenAISdk({
        // The SDK refuses to start without a key; compatible servers without auth ignore this placeholder.
        apiKey: options.apiKey || 'not-needed',
        baseURL,
        organization: null,
        project: null,
        maxRetries: 0,
        fetch: options.fetch ?? httpFetch,
        ...(options.headers ? { defaultHeaders: options.headers } : {}),
      }),
      APIError,
    })),
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
        encodeBody(options.model, request, official),
        callOptions,
        options.apiKey,
      ),
    prepare: sdk.prepare,
  };
}

/** `chat.completions.create` sends `{ body }` through this path; the body here is already JSON text. */
const jsonBody = { 'content-type': 'application/json' };

/** The SDK's client and its error class, which errors found in a stream are made of. */
interface Sdk {
  client: OpenAI;
  APIError: typeof APIError;
}

function streamChatCompletion(
  connect: () => Promise<Sdk>,
  bodyJson: string,
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
    open: async () => {
      const { client, APIError } = await connect();
      // The SDK sends the request and turns an error status into its error; the stream is read here
      // (`chatCompletionChunks`), as its own `Stream` reads it.
      const response = await client
        .post('/chat/completions', { body: bodyJson, headers: jsonBody, stream: true, signal })
        .asResponse();
      return chatCompletionChunks(response, APIError);
    },
    onItem(chunk, emit) {
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices?.[0];
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

/** More tool calls than this in one answer is a server misbehaving, not a model asking. */
const maxToolCallIndex = 127;
/** A longer event in the stream is a server misbehaving: an event is kept in memory until it ends. */
const maxEventChars = 8 * 1024 * 1024;

/**
 * The chunks of a Chat Completions event stream, read as the SDK's `Stream` reads them: each event's data
 * parsed as JSON up to `[DONE]`, the rest of the body drained so that the connection can serve the next
 * request; a chunk carrying `error` ends it with the SDK's `APIError`, and an abort ends it quietly (the
 * caller tells an abort from a finished answer by its signal). What the server sends is checked before it
 * is trusted: JSON objects, choices in a list, tool call fragments in a list with an `index` from 0 to 127,
 * no event over 8 MiB.
 */
async function* chatCompletionChunks(
  response: Response,
  APIError: Sdk['APIError'],
): AsyncGenerator<ChatCompletionChunk, void, undefined> {
  const misbehaving = (message: string) =>
    new APIError(undefined, undefined, `The provider's stream is malformed: ${message}`, response.headers);
  if (!response.body) throw misbehaving('the answer has no body');
  let done = false;
  try {
    for await (const event of serverSentEvents(response.body as AsyncIterable<Uint8Array>, maxEventChars)) {
      if (done || event.event?.startsWith('thread.')) continue;
      if (event.data.startsWith('[DONE]')) {
        done = true;
        continue;
      }
      let chunk: ChatCompletionChunk & { error?: unknown };
      try {
        chunk = JSON.parse(event.data);
      } catch {
        throw misbehaving('an event is not JSON');
      }
      if (chunk?.error) throw new APIError(undefined, chunk.error, undefined, response.headers);
      if (typeof chunk !== 'object' || chunk === null) throw misbehaving('a chunk is not an object');
      if (chunk.choices !== undefined && !Array.isArray(chunk.choices))
        throw misbehaving('`choices` is not a list');
      const toolCalls = chunk.choices?.[0]?.delta?.tool_calls;
      if (toolCalls !== undefined && toolCalls !== null) {
        if (!Array.isArray(toolCalls)) throw misbehaving('`tool_calls` is not a list');
        for (const fragment of toolCalls)
          if (!Number.isInteger(fragment?.index) || fragment.index < 0 || fragment.index > maxToolCallIndex)
            throw misbehaving(`a tool call's index is not an integer from 0 to ${maxToolCallIndex}`);
      }
      yield chunk;
    }
  } catch (error) {
    if ((error as { name?: unknown } | null)?.name === 'AbortError') return;
    throw error instanceof EventTooLongError ? misbehaving(error.message) : error;
  }
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

/**
 * The request body as JSON text, in the key order the SDK's own encoding of the same object has. A chat turn
 * sends the same tools and, but for the newest, the same messages every time: the JSON of a frozen message
 * or tool definition (memory's context and the tool registry hand theirs out frozen) is made once and kept,
 * so a turn does not serialize its whole context again (the tools alone were about 7.5 KiB of nested
 * objects, a fifth of a provider turn's JavaScript in the SDK).
 */
function encodeBody(model: string, request: ModelRequest, official: boolean): string {
  let json = `{"model":${JSON.stringify(model)},"messages":[`;
  for (let index = 0; index < request.messages.length; index++) {
    if (index > 0) json += ',';
    json += messageJson(request.messages[index]!);
  }
  json += '],"stream":true,"stream_options":{"include_usage":true}';
  const rest: Omit<ChatCompletionCreateParamsStreaming, 'model' | 'messages' | 'stream'> = {};
  if (request.tools?.length) {
    json += `,"tools":${toolsJson(request.tools)}`;
    if (request.toolChoice) rest.tool_choice = toToolChoice(request.toolChoice);
  }
  if (request.maxTokens !== undefined) {
    // The official API wants max_completion_tokens (reasoning models reject max_tokens); most compatible
    // servers only know max_tokens.
    if (official) rest.max_completion_tokens = request.maxTokens;
    else rest.max_tokens = request.maxTokens;
  }
  if (request.temperature !== undefined) rest.temperature = request.temperature;
  if (request.responseFormat) {
    rest.response_format = request.responseFormat.schema
      ? {
          type: 'json_schema',
          json_schema: {
            name: request.responseFormat.name ?? 'response',
            schema: request.responseFormat.schema,
          },
        }
      : { type: 'json_object' };
  }
  const restJson = JSON.stringify(rest);
  return restJson === '{}' ? `${json}}` : `${json},${restJson.slice(1)}`;
}

const messageJsonOf = new WeakMap<ModelRequest['messages'][number], string>();
const toolJsonOf = new WeakMap<ModelToolDefinition, string>();
const toolsJsonOf = new WeakMap<readonly ModelToolDefinition[], string>();

/** The last system message's text and its JSON: the prompt is made afresh each turn, mostly the same text. */
let lastSystem = { content: '', json: '{"role":"system","content":""}' };

function messageJson(message: ModelRequest['messages'][number]): string {
  const kept = messageJsonOf.get(message);
  if (kept !== undefined) return kept;
  if (message.role === 'system') {
    if (message.content !== lastSystem.content)
      lastSystem = { content: message.content, json: JSON.stringify(toOpenAIMessage(message)) };
    return lastSystem.json;
  }
  const json = JSON.stringify(toOpenAIMessage(message));
  if (unchanging(message)) messageJsonOf.set(message, json);
  return json;
}

/** Frozen, and so are its tool calls and their arguments: what it encodes to cannot change. */
function unchanging(message: ModelRequest['messages'][number]): boolean {
  if (!Object.isFrozen(message)) return false;
  if (message.role !== 'assistant' || message.toolCalls === undefined) return true;
  return (
    Object.isFrozen(message.toolCalls) &&
    message.toolCalls.every((call) => Object.isFrozen(call) && Object.isFrozen(call.arguments))
  );
}

function toolsJson(tools: readonly ModelToolDefinition[]): string {
  const kept = toolsJsonOf.get(tools);
  if (kept !== undefined) return kept;
  let json = '[';
  let keep = Object.isFrozen(tools);
  for (let index = 0; index < tools.length; index++) {
    const tool = tools[index]!;
    let toolJson = toolJsonOf.get(tool);
    if (toolJson === undefined) {
      const encoded: ChatCompletionTool = {
        type: 'function',
        function: { name: tool.name, description: tool.description, parameters: tool.inputSchema },
      };
      toolJson = JSON.stringify(encoded);
      if (Object.isFrozen(tool) && Object.isFrozen(tool.inputSchema)) toolJsonOf.set(tool, toolJson);
      else keep = false;
    }
    json += index > 0 ? `,${toolJson}` : toolJson;
  }
  json += ']';
  if (keep) toolsJsonOf.set(tools, json);
  return json;
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
