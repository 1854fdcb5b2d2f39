import { spawn } from 'node:child_process';
import { StringDecoder } from 'node:string_decoder';
import { z } from 'zod';
import { ErrorCodes } from '../util/index.js';
import { contextWindowFor } from './context-windows.js';
import { abortedError, timeoutError } from './provider-errors.js';
import { renderConversation } from './render.js';
import type { LanguageModel, ModelStreamError, ModelStreamEvent, ModelUsage } from './spec.js';

/**
 * Options of `createCommandModel` (`command/<name>` in config): a CLI that answers the rendered conversation.
 */
export interface CommandModelOptions {
  command: string;
  args?: string[];
  /** `text`: stdout is the reply. `claude-stream-json`: stdout is Claude Code's `--output-format stream-json`. */
  format?: 'text' | 'claude-stream-json';
  /** Kills the process (SIGTERM, then SIGKILL) and ends with PROVIDER_TIMEOUT. Default 300000. */
  timeoutMs?: number;
  /** Time between SIGTERM and SIGKILL. Default 2000. */
  killGraceMs?: number;
  /** Stdout beyond this is an error (the process is killed). Default 10 MiB. */
  maxOutputBytes?: number;
  cwd?: string;
  /** Environment of the child; default the parent's (CLIs keep their own credentials). */
  env?: Record<string, string | undefined>;
  /** Reported as `LanguageModel.modelId`; default the command name. */
  modelId?: string;
  contextWindowTokens?: number;
}

/** Ready-made settings for known CLIs, used by `command/claude` and `command/gemini`. */
export const commandPresets = {
  claude: {
    command: 'claude',
    args: ['-p', '--output-format', 'stream-json', '--verbose'],
    format: 'claude-stream-json',
    modelId: 'claude',
  },
  gemini: { command: 'gemini', args: [], format: 'text', modelId: 'gemini' },
} as const satisfies Record<string, CommandModelOptions>;

const stderrKeepChars = 2000;

/**
 * A CLI as the model (for agents of the world that run on `claude` or `gemini`): the rendered conversation goes to stdin, the reply comes from stdout.
 * A non-zero exit or an empty reply is PROVIDER_ERROR with the end of stderr in the message.
 */
export function createCommandModel(options: CommandModelOptions): LanguageModel {
  const modelId = options.modelId ?? options.command;
  return {
    specificationVersion: 'v1',
    provider: 'command',
    modelId,
    contextWindowTokens: options.contextWindowTokens ?? contextWindowFor(modelId),
    doStream: (request, callOptions) => runCommand(options, renderConversation(request), callOptions.signal),
  };
}

/** Turns the push-style events of a child process into a pull-style stream; ends at finish or error. */
export function createEventQueue() {
  const events: ModelStreamEvent[] = [];
  let ended = false;
  let wake: (() => void) | undefined;
  return {
    push(event: ModelStreamEvent) {
      if (ended) return;
      events.push(event);
      if (event.type === 'finish' || event.type === 'error') ended = true;
      wake?.();
    },
    get ended() {
      return ended;
    },
    async *drain(): AsyncGenerator<ModelStreamEvent, void, undefined> {
      for (;;) {
        const event = events.shift();
        if (event) {
          yield event;
          if (event.type === 'finish' || event.type === 'error') return;
          continue;
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
      }
    },
  };
}

async function* runCommand(
  options: CommandModelOptions,
  prompt: string,
  signal: AbortSignal | undefined,
): AsyncGenerator<ModelStreamEvent, void, undefined> {
  if (signal?.aborted) {
    yield { type: 'error', error: abortedError() };
    return;
  }
  const queue = createEventQueue();
  const format = options.format ?? 'text';
  const timeoutMs = options.timeoutMs ?? 300_000;
  const maxOutputBytes = options.maxOutputBytes ?? 10 * 1024 * 1024;
  const child = spawn(options.command, options.args ?? [], {
    cwd: options.cwd,
    env: options.env ?? process.env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const name = options.command;
  let stderr = '';
  let outputBytes = 0;
  let outputText = '';
  let killTimer: NodeJS.Timeout | undefined;
  const parser = format === 'claude-stream-json' ? createClaudeStreamParser() : undefined;
  const decoder = new StringDecoder('utf8');

  const stop = (error: ModelStreamError) => {
    queue.push({ type: 'error', error });
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      killTimer = setTimeout(() => child.kill('SIGKILL'), options.killGraceMs ?? 2000);
      killTimer.unref();
    }
  };
  const timer = setTimeout(() => stop(timeoutError(timeoutMs, `The command '${name}'`)), timeoutMs);
  const onAbort = () => stop(abortedError());
  signal?.addEventListener('abort', onAbort, { once: true });

  const emitText = (text: string) => {
    if (!text) return;
    outputText += text;
    queue.push({ type: 'text-delta', text });
  };
  child.stdout.on('data', (chunk: Buffer) => {
    outputBytes += chunk.length;
    if (outputBytes > maxOutputBytes) {
      stop({
        code: ErrorCodes.providerError,
        message: `The command '${name}' wrote more than ${maxOutputBytes} bytes.`,
        retryable: false,
      });
      return;
    }
    const text = decoder.write(chunk);
    if (parser) for (const piece of parser.feed(text)) emitText(piece);
    else emitText(text);
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-stderrKeepChars);
  });
  child.stdin.on('error', () => {
    // The process may exit without reading its input (EPIPE); its exit status tells what happened.
  });
  child.on('error', (error: NodeJS.ErrnoException) => {
    const message =
      error.code === 'ENOENT'
        ? `The command '${name}' was not found. Install it or set the full path in the model's command.`
        : `The command '${name}' could not be started: ${error.message}`;
    queue.push({ type: 'error', error: { code: ErrorCodes.providerError, message, retryable: false } });
  });
  child.on('close', (code, killSignal) => {
    clearTimeout(timer);
    if (killTimer) clearTimeout(killTimer);
    signal?.removeEventListener('abort', onAbort);
    if (queue.ended) return;
    const tail = decoder.end();
    if (parser) for (const piece of parser.feed(`${tail}\n`)) emitText(piece);
    else emitText(tail);
    const excerpt = stderr.trim() ? ` stderr: ${stderr.trim().slice(-500)}` : '';
    if (code !== 0) {
      const how = code === null ? `was killed by ${killSignal}` : `exited with code ${code}`;
      queue.push({
        type: 'error',
        error: {
          code: ErrorCodes.providerError,
          message: `The command '${name}' ${how}.${excerpt}`,
          retryable: false,
        },
      });
      return;
    }
    if (parser?.failure) {
      queue.push({
        type: 'error',
        error: {
          code: ErrorCodes.providerError,
          message: `The command '${name}' reported an error: ${parser.failure}`,
          retryable: false,
        },
      });
      return;
    }
    if (parser && !outputText.trim() && parser.resultText) emitText(parser.resultText);
    if (!outputText.trim()) {
      queue.push({
        type: 'error',
        error: {
          code: ErrorCodes.providerError,
          message: `The command '${name}' produced no output.${excerpt}`,
          retryable: false,
        },
      });
      return;
    }
    if (parser?.usage) queue.push({ type: 'usage', usage: parser.usage });
    queue.push({ type: 'finish', stopReason: 'end_turn' });
  });
  child.stdin.end(prompt);

  try {
    yield* queue.drain();
  } finally {
    // The caller left early: do not leave the process running.
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

const claudeLine = z
  .object({
    type: z.string(),
    message: z
      .object({ content: z.array(z.looseObject({ type: z.string(), text: z.string().optional() })) })
      .loose()
      .optional(),
    event: z
      .looseObject({
        type: z.string(),
        delta: z.looseObject({ type: z.string(), text: z.string().optional() }).optional(),
      })
      .optional(),
    result: z.string().optional(),
    is_error: z.boolean().optional(),
    usage: z
      .looseObject({
        input_tokens: z.number().optional(),
        output_tokens: z.number().optional(),
        cache_read_input_tokens: z.number().optional(),
        cache_creation_input_tokens: z.number().optional(),
      })
      .optional(),
  })
  .loose();

/**
 * Claude Code's stream-json: one JSON object per line. Text comes from `assistant` messages (or from
 * `stream_event` deltas with --include-partial-messages); the final `result` line carries usage and
 * `is_error`. Tool use inside the CLI is the CLI's own business and is not surfaced.
 */
function createClaudeStreamParser() {
  let buffer = '';
  let partial = false;
  let assistantMessages = 0;
  const state = {
    usage: undefined as ModelUsage | undefined,
    resultText: undefined as string | undefined,
    failure: undefined as string | undefined,
    feed(text: string): string[] {
      buffer += text;
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      const out: string[] = [];
      for (const raw of lines) {
        const line = raw.trim();
        if (!line.startsWith('{')) continue;
        let value: unknown;
        try {
          value = JSON.parse(line);
        } catch {
          continue;
        }
        const parsed = claudeLine.safeParse(value);
        if (!parsed.success) continue;
        const entry = parsed.data;
        if (
          entry.type === 'stream_event' &&
          entry.event?.type === 'content_block_delta' &&
          entry.event.delta?.type === 'text_delta'
        ) {
          partial = true;
          out.push(entry.event.delta.text ?? '');
        } else if (entry.type === 'assistant' && entry.message) {
          const text = entry.message.content
            .filter((block) => block.type === 'text')
            .map((block) => block.text ?? '')
            .join('');
          if (text && !partial) out.push(assistantMessages > 0 ? `\n\n${text}` : text);
          if (text) assistantMessages++;
        } else if (entry.type === 'result') {
          state.resultText = entry.result;
          if (entry.is_error) state.failure = entry.result ?? 'is_error';
          if (entry.usage) {
            state.usage = {
              inputTokens:
                (entry.usage.input_tokens ?? 0) +
                (entry.usage.cache_read_input_tokens ?? 0) +
                (entry.usage.cache_creation_input_tokens ?? 0),
              outputTokens: entry.usage.output_tokens ?? 0,
            };
          }
        }
      }
      return out;
    },
  };
  return state;
}
