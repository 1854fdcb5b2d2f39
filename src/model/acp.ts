import { spawn } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import type { ClientConnection, StopReason } from '@agentclientprotocol/sdk';
import { ErrorCodes } from '../util/index.js';
import { createEventQueue } from './command.js';
import { contextWindowFor } from './context-windows.js';
import { abortedError, timeoutError } from './provider-errors.js';
import { renderConversation } from './render.js';
import type { LanguageModel, ModelStopReason, ModelStreamError, ModelStreamEvent } from './spec.js';

/** Options of `createAcpModel` (`acp/<command>` in config): the ACP agent to spawn and how to answer it. */
export interface AcpModelOptions {
  command: string;
  args?: string[];
  /** The session's working directory (ACP wants it absolute); default the process's. */
  cwd?: string;
  /** Environment of the agent process; default the parent's (agents keep their own credentials). */
  env?: Record<string, string | undefined>;
  /**
   * What to answer when the agent asks permission for one of its own tool calls. Nobody is there to ask,
   * so the default refuses; `allow` lets the agent act (edit files, run commands) on its own.
   */
  permissions?: 'reject' | 'allow';
  /** The whole prompt turn, start-up included. Default 300000. */
  timeoutMs?: number;
  /** Time between SIGTERM and SIGKILL. Default 2000. */
  killGraceMs?: number;
  /** Reported as `LanguageModel.modelId`; default the command line. */
  modelId?: string;
  contextWindowTokens?: number;
}

const stderrKeepChars = 2000;

/** `acp/<command line>` → command and arguments, split on whitespace (no quoting). */
export function parseAcpModelName(model: string): { command: string; args: string[] } {
  const [command = '', ...args] = model.trim().split(/\s+/);
  return { command, args };
}

function stopReasonOf(reason: StopReason): ModelStopReason {
  switch (reason) {
    case 'max_tokens':
      return 'max_tokens';
    case 'refusal':
      return 'content_filter';
    default:
      return 'end_turn';
  }
}

/**
 * An external ACP agent (a coding agent's ACP adapter, another agentd) as the model, like the `command`
 * provider does for CLIs: each call spawns the agent, runs initialize → session/new → session/prompt with
 * the rendered conversation, and streams its `agent_message_chunk`s as text. The agent's own tool calls
 * stay inside it. The stream never throws: every failure is a final `error` event.
 */
export function createAcpModel(options: AcpModelOptions): LanguageModel {
  const modelId = options.modelId ?? [options.command, ...(options.args ?? [])].join(' ');
  return {
    specificationVersion: 'v1',
    provider: 'acp',
    modelId,
    contextWindowTokens: options.contextWindowTokens ?? contextWindowFor(modelId),
    doStream: (request, callOptions) => runAcpTurn(options, renderConversation(request), callOptions.signal),
    // The agent itself starts with each call; only the SDK that speaks to it can be loaded ahead.
    prepare: async () => {
      await import('@agentclientprotocol/sdk');
    },
  };
}

async function* runAcpTurn(
  options: AcpModelOptions,
  prompt: string,
  signal: AbortSignal | undefined,
): AsyncGenerator<ModelStreamEvent, void, undefined> {
  if (signal?.aborted) {
    yield { type: 'error', error: abortedError() };
    return;
  }
  // The SDK is loaded by the first turn that uses an ACP agent as its model, not by every runtime.
  const { client, ndJsonStream } = await import('@agentclientprotocol/sdk');
  const queue = createEventQueue();
  const name = options.command;
  const timeoutMs = options.timeoutMs ?? 300_000;
  const child = spawn(options.command, options.args ?? [], {
    cwd: options.cwd,
    env: options.env ?? process.env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  let killTimer: NodeJS.Timeout | undefined;
  let connection: ClientConnection | undefined;
  let sessionId: string | undefined;
  const excerpt = () => (stderr.trim() ? ` stderr: ${stderr.trim().slice(-500)}` : '');
  const providerError = (message: string): ModelStreamError => ({
    code: ErrorCodes.providerError,
    message,
    retryable: false,
  });

  const kill = () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    killTimer = setTimeout(() => child.kill('SIGKILL'), options.killGraceMs ?? 2000);
    killTimer.unref();
  };
  const stop = (error: ModelStreamError) => {
    queue.push({ type: 'error', error });
    if (connection && sessionId)
      void connection.agent.notify('session/cancel', { sessionId }).catch(() => {});
    kill();
  };
  const timer = setTimeout(() => stop(timeoutError(timeoutMs, `The ACP agent '${name}'`)), timeoutMs);
  const onAbort = () => stop(abortedError());
  signal?.addEventListener('abort', onAbort, { once: true });

  child.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-stderrKeepChars);
  });
  child.stdin.on('error', () => {
    // The agent may exit without reading its input (EPIPE); its exit status tells what happened.
  });
  child.on('error', (error: NodeJS.ErrnoException) => {
    queue.push({
      type: 'error',
      error: providerError(
        error.code === 'ENOENT'
          ? `The ACP agent '${name}' was not found. Install it or give the full path in acp/<command>.`
          : `The ACP agent '${name}' could not be started: ${error.message}`,
      ),
    });
  });
  child.on('close', (code, killSignal) => {
    clearTimeout(timer);
    if (killTimer) clearTimeout(killTimer);
    connection?.close();
    const how = code === null ? `was killed by ${killSignal}` : `exited with code ${code}`;
    queue.push({
      type: 'error',
      error: providerError(`The ACP agent '${name}' ${how} mid-turn.${excerpt()}`),
    });
  });

  if (child.pid !== undefined) {
    connection = client({ name: 'agentd' })
      .onNotification('session/update', ({ params }) => {
        const update = params.update;
        if (
          params.sessionId === sessionId &&
          update.sessionUpdate === 'agent_message_chunk' &&
          update.content.type === 'text' &&
          update.content.text
        )
          queue.push({ type: 'text-delta', text: update.content.text });
      })
      .onRequest('session/request_permission', ({ params }) => {
        const wanted = options.permissions === 'allow' ? ['allow_once', 'allow_always'] : ['reject_once'];
        const option = params.options.find((candidate) => wanted.includes(candidate.kind));
        return option
          ? { outcome: { outcome: 'selected', optionId: option.optionId } }
          : { outcome: { outcome: 'cancelled' } };
      })
      .connect(
        ndJsonStream(
          Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
          Readable.toWeb(child.stdout) as ReadableStream<Uint8Array>,
        ),
      );
    const agentContext = connection.agent;
    void (async () => {
      await agentContext.request('initialize', {
        protocolVersion: 1,
        clientCapabilities: {},
        clientInfo: { name: 'agentd', version: '1' },
      });
      const session = await agentContext.request('session/new', {
        cwd: options.cwd ?? process.cwd(),
        mcpServers: [],
      });
      sessionId = session.sessionId;
      const response = await agentContext.request('session/prompt', {
        sessionId,
        prompt: [{ type: 'text', text: prompt }],
      });
      if (response.stopReason === 'cancelled') queue.push({ type: 'error', error: abortedError() });
      else queue.push({ type: 'finish', stopReason: stopReasonOf(response.stopReason) });
    })().catch((error: unknown) => {
      // A closed connection means the agent's stdout ended: its exit, reported on `close`, says why.
      if (connection?.signal.aborted) return;
      const message = error instanceof Error ? error.message : String(error);
      queue.push({
        type: 'error',
        error: providerError(`The ACP agent '${name}' failed: ${message}${excerpt()}`),
      });
    });
  }

  try {
    yield* queue.drain();
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    connection?.close();
    kill();
  }
}
