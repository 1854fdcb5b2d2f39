import { Option } from 'commander';
import { AgentdError, ErrorCodes } from '../util/index.js';
import { connectGateway, type GatewayClient } from './gateway-client.js';

export interface RemoteOptions {
  url?: string;
  token?: string;
}

/**
 * `--url` for a command that can talk to a server. The one place it is declared, so `$AGENTD_URL` is its
 * default on every such command (commander reads the variable when the command line is parsed).
 */
export function urlOption(description = 'a running agentd gateway, e.g. ws://127.0.0.1:7777'): Option {
  // commander's help adds "(env: AGENTD_URL)" itself.
  return new Option('--url <url>', description).env('AGENTD_URL');
}

/** `--token` beside `--url`; $AGENTD_TOKEN is read when connecting (see `connectFromOptions`). */
export function tokenOption(): Option {
  return new Option('--token <token>', 'gateway token (default $AGENTD_TOKEN)');
}

function remoteToken(options: RemoteOptions): string | undefined {
  return options.token ?? process.env.AGENTD_TOKEN;
}

/** Connects to the `--url` gateway with `--token` (or $AGENTD_TOKEN). */
export function connectFromOptions(options: RemoteOptions): Promise<GatewayClient> {
  const token = remoteToken(options);
  return connectGateway({ url: options.url!, ...(token ? { token } : {}) });
}

export function sessionKeyFor(agent: string, session: string | undefined): string {
  if (!session) return `agent:${agent}:main`;
  return session.startsWith('agent:') ? session : `agent:${agent}:${session}`;
}

/** `chat.send`'s answer to a session command instead of a started run. */
interface CommandAnswer {
  reset?: { sessionId?: string };
  aborted?: boolean;
}

/**
 * Sends one turn over the gateway and resolves with the final text, streaming deltas to `onDelta` and the
 * name of each tool call as it starts to `onTool`. `/new`, `/reset` and `/stop` are answered by the
 * `chat.send` response itself (no run, so no final `chat` event): they resolve with that answer.
 */
export async function remoteTurn(
  client: GatewayClient,
  sessionKey: string,
  text: string,
  timeoutMs: number,
  onDelta: (delta: string) => void,
  onTool: (name: string) => void = () => {},
) {
  const idempotencyKey = `cli-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
  return new Promise<{
    runId: string;
    status: string;
    text: string;
    error?: { code: string; message: string };
  }>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new AgentdError({
            code: ErrorCodes.timeout,
            message: `no final reply within ${timeoutMs} ms`,
            fault: 'system',
          }),
        ),
      timeoutMs,
    );
    const off = client.onEvent((event, payload) => {
      if (payload?.runId !== idempotencyKey) return;
      if (event === 'agent' && payload.stream === 'tool' && payload.data?.phase === 'start')
        onTool(String(payload.data.name));
      if (event !== 'chat') return;
      if (payload.state === 'delta' && typeof payload.deltaText === 'string') onDelta(payload.deltaText);
      if (payload.state === 'final' || payload.state === 'aborted' || payload.state === 'error') {
        clearTimeout(timer);
        off();
        const finalText =
          payload.message?.content?.map((part: { text?: string }) => part.text ?? '').join('') ?? '';
        resolve({
          runId: idempotencyKey,
          status: payload.state === 'final' ? 'completed' : payload.state,
          text: finalText,
          ...(payload.state === 'error'
            ? {
                error: {
                  code: payload.errorKind ?? 'ERROR',
                  message: payload.errorMessage ?? 'the run failed',
                },
              }
            : {}),
        });
      }
    });
    client.call<CommandAnswer>('chat.send', { sessionKey, message: text, idempotencyKey }).then(
      (answer) => {
        if (answer?.reset === undefined && answer?.aborted === undefined) return;
        clearTimeout(timer);
        off();
        const said = answer.reset
          ? `New session${answer.reset.sessionId ? ` ${answer.reset.sessionId}` : ''} under ${sessionKey}.`
          : answer.aborted
            ? 'Stopped.'
            : 'Nothing is running.';
        resolve({ runId: idempotencyKey, status: 'completed', text: said });
      },
      (error) => {
        clearTimeout(timer);
        off();
        reject(error);
      },
    );
  });
}
