/** A browser client of agentd's OpenClaw-protocol gateway: the same WebSocket and methods as every client. */

export interface GatewayError {
  code: string;
  message: string;
}

export type EventHandler = (event: string, payload: any) => void;

export interface Gateway {
  call<T = any>(method: string, params?: Record<string, unknown>): Promise<T>;
  onEvent(handler: EventHandler): () => void;
  /** Resolves when the socket closes (the reason is given). */
  closed: Promise<string>;
  close(): void;
  methods: ReadonlySet<string>;
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: GatewayError): void;
}

export function gatewayUrl(location: Location): string {
  return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws`;
}

/** Opens the socket, answers the challenge with the token, and resolves once the gateway said hello. */
export function connectGateway(url: string, token: string): Promise<Gateway> {
  return new Promise((resolveConnect, rejectConnect) => {
    const socket = new WebSocket(url);
    const pending = new Map<string, Pending>();
    const handlers = new Set<EventHandler>();
    let nextId = 1;
    let connected = false;
    let resolveClosed!: (reason: string) => void;
    const closed = new Promise<string>((resolve) => {
      resolveClosed = resolve;
    });

    const send = <T>(method: string, params: Record<string, unknown>): Promise<T> =>
      new Promise<T>((resolve, reject) => {
        if (socket.readyState !== WebSocket.OPEN) {
          reject({ code: 'GATEWAY_CLOSED', message: 'not connected' });
          return;
        }
        const id = `d${nextId++}`;
        pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
        socket.send(JSON.stringify({ type: 'req', id, method, params }));
      });

    socket.addEventListener('message', (message) => {
      let frame: any;
      try {
        frame = JSON.parse(String(message.data));
      } catch {
        return;
      }
      if (frame.type === 'event' && frame.event === 'connect.challenge' && !connected) {
        send<{ features?: { methods?: string[] } }>('connect', {
          minProtocol: 4,
          maxProtocol: 4,
          client: { id: 'agentd-dashboard', version: '1', platform: 'web', mode: 'ui' },
          role: 'operator',
          scopes: ['operator.read', 'operator.write', 'operator.admin'],
          caps: ['tool-events'],
          auth: { token },
        }).then(
          (hello) => {
            connected = true;
            resolveConnect({
              call: (method, params = {}) => send(method, params),
              onEvent(handler) {
                handlers.add(handler);
                return () => handlers.delete(handler);
              },
              closed,
              close: () => socket.close(1000),
              methods: new Set(hello.features?.methods ?? []),
            });
          },
          (error: GatewayError) => {
            rejectConnect(error);
            socket.close();
          },
        );
        return;
      }
      if (frame.type === 'res') {
        const entry = pending.get(frame.id);
        if (!entry) return;
        // Two-phase methods answer "accepted" first; the dashboard waits for events instead.
        pending.delete(frame.id);
        if (frame.ok) entry.resolve(frame.payload);
        else entry.reject({ code: frame.error?.code ?? 'ERROR', message: frame.error?.message ?? 'failed' });
      } else if (frame.type === 'event') {
        for (const handler of handlers) handler(frame.event, frame.payload);
      }
    });
    socket.addEventListener('close', (event) => {
      for (const entry of pending.values())
        entry.reject({ code: 'GATEWAY_CLOSED', message: 'connection closed' });
      pending.clear();
      resolveClosed(event.reason || `closed (${event.code})`);
      if (!connected) rejectConnect({ code: 'UNAUTHORIZED', message: event.reason || 'connection refused' });
    });
  });
}
