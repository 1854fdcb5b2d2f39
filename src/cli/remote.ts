import { AgentdError, ErrorCodes } from '../util/index.js';
import { connectGateway, type GatewayClient } from './gateway-client.js';

export interface RemoteOptions {
  url?: string;
  token?: string;
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

/** Sends one turn over the gateway and resolves with the final text, streaming deltas to `onDelta`. */
export async function remoteTurn(
  client: GatewayClient,
  sessionKey: string,
  text: string,
  timeoutMs: number,
  onDelta: (delta: string) => void,
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
      if (event !== 'chat' || payload?.runId !== idempotencyKey) return;
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
    client.call('chat.send', { sessionKey, message: text, idempotencyKey }).catch((error) => {
      clearTimeout(timer);
      off();
      reject(error);
    });
  });
}
