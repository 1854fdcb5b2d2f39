// The OpenClaw-protocol chat client of the gateway benchmarks: an operator with write scope and token auth
// that answers the server's challenge, then sends `chat.send` turns and waits for each run's final event.
import WebSocket from 'ws';

export interface ChatClient {
  ws: WebSocket;
  name: string;
  turn: number;
  sessionKey: string;
  onTurnEnd: (() => void) | undefined;
  /** Bytes of each frame of the last turn (sizes a bare-ws floor's frames). */
  frames: number[];
  helloBytes: number;
}

interface Frame {
  type?: string;
  event?: string;
  payload?: { state?: string; runId?: string; type?: string };
}

/**
 * The `connect` request answering `connect.challenge`: an operator with token auth. The real OpenClaw
 * gateway wants its own CLI's client id and read scope too.
 */
export function connectRequest(
  id: string,
  token: string,
  client: { id: string; scopes: string[] } = { id: 'bench', scopes: ['operator.write'] },
): string {
  return JSON.stringify({
    type: 'req',
    id,
    method: 'connect',
    params: {
      minProtocol: 4,
      maxProtocol: 4,
      client: { id: client.id, version: '1', platform: 'linux', mode: 'cli' },
      role: 'operator',
      scopes: client.scopes,
      caps: [],
      auth: { token },
    },
  });
}

/** Connects and resolves after `hello-ok`; a turn's run id is `<name>-<turn>`. */
export function openChatClient(
  url: string,
  name: string,
  token: string,
  sessionKey = `agent:main:${name}`,
): Promise<ChatClient> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    const client: ChatClient = {
      ws,
      name,
      turn: 0,
      sessionKey,
      onTurnEnd: undefined,
      frames: [],
      helloBytes: 0,
    };
    let connected = false;
    ws.once('error', reject);
    ws.on('message', (data: Buffer) => {
      const frame = JSON.parse(data.toString()) as Frame;
      if (!connected) {
        if (frame.event === 'connect.challenge') {
          ws.send(connectRequest(`c-${name}`, token));
        } else if (frame.type === 'res' && frame.payload?.type === 'hello-ok') {
          connected = true;
          client.helloBytes = data.length;
          resolve(client);
        }
        return;
      }
      client.frames.push(data.length);
      if (
        frame.event === 'chat' &&
        frame.payload?.state === 'final' &&
        frame.payload.runId === `${name}-${client.turn}`
      ) {
        const done = client.onTurnEnd;
        client.onTurnEnd = undefined;
        done?.();
      }
    });
  });
}

/**
 * Sends the client's next turn (its text `message`, else `turn <n>`); `onEnd` gets the time from send to the
 * run's final event.
 */
export function sendChatTurn(client: ChatClient, onEnd: (latencyMs: number) => void, message?: string): void {
  client.turn++;
  client.frames = [];
  const sentAt = performance.now();
  client.onTurnEnd = () => onEnd(performance.now() - sentAt);
  client.ws.send(
    JSON.stringify({
      type: 'req',
      id: `t-${client.name}-${client.turn}`,
      method: 'chat.send',
      params: {
        sessionKey: client.sessionKey,
        message: message ?? `turn ${client.turn}`,
        idempotencyKey: `${client.name}-${client.turn}`,
      },
    }),
  );
}
