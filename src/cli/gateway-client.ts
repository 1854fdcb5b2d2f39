import { randomUUID } from 'node:crypto';
import { AgentdError, ErrorCodes, lazyPackage, SystemError, UserInputError } from '../util/index.js';
import { CliErrorCodes } from './output.js';

/** An OpenClaw-protocol (v4) client, used by `agentd send|chat|status --url` and by tests and benchmarks. */
export interface GatewayClient {
  readonly hello: HelloOk;
  call<T = unknown>(
    method: string,
    params?: Record<string, unknown>,
    options?: { expectFinal?: boolean; timeoutMs?: number },
  ): Promise<T>;
  onEvent(handler: (event: string, payload: any, seq: number | undefined) => void): () => void;
  close(): Promise<void>;
}

export interface HelloOk {
  type: 'hello-ok';
  protocol: number;
  server: { version: string; connId: string };
  features: { methods: string[]; events: string[] };
  snapshot: Record<string, any>;
  policy: { maxPayload: number; maxBufferedBytes: number; tickIntervalMs: number };
}

export interface ConnectGatewayOptions {
  url: string;
  token?: string;
  scopes?: string[];
  protocol?: 3 | 4;
  timeoutMs?: number;
  clientId?: string;
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
  expectFinal: boolean;
  timer: NodeJS.Timeout;
}

function toError(error: {
  code?: string;
  message?: string;
  retryable?: boolean;
  details?: Record<string, unknown>;
}) {
  return new UserInputError({
    code: error.code ?? ErrorCodes.internal,
    message: error.message ?? 'gateway error',
    retryable: error.retryable,
    details: error.details,
  });
}

/** `ws`, loaded with the first connection: `--version`, `--help` and the local commands never open one. */
const webSocketPackage = lazyPackage<typeof import('ws')>('ws');

/** A frame from the gateway, or `undefined` for one that is not a JSON object (it is ignored). */
function parseFrame(data: unknown): any {
  try {
    const frame = JSON.parse(String(data));
    return typeof frame === 'object' && frame !== null ? frame : undefined;
  } catch {
    return undefined;
  }
}

export async function connectGateway(options: ConnectGatewayOptions): Promise<GatewayClient> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const { WebSocket } = webSocketPackage();
  const socket = new WebSocket(options.url, { maxPayload: 64 * 1024 * 1024 });
  const pending = new Map<string, Pending>();
  const handlers = new Set<(event: string, payload: any, seq: number | undefined) => void>();
  let nextId = 1;

  const failAll = (error: unknown) => {
    for (const entry of pending.values()) {
      clearTimeout(entry.timer);
      entry.reject(error);
    }
    pending.clear();
  };

  const challenge = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new SystemError({ code: ErrorCodes.timeout, message: `no connect.challenge from ${options.url}` }),
        ),
      timeoutMs,
    );
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(
        new SystemError({
          code: CliErrorCodes.gatewayUnreachable,
          message: `cannot reach ${options.url}: ${error.message}`,
          cause: error,
        }),
      );
    });
    socket.on('message', function first(data) {
      const frame = parseFrame(data);
      if (frame?.type === 'event' && frame.event === 'connect.challenge') {
        clearTimeout(timer);
        socket.off('message', first);
        resolve();
      }
    });
  });

  socket.on('message', (data) => {
    const frame = parseFrame(data);
    if (frame?.type === 'res') {
      const entry = pending.get(frame.id);
      if (!entry) return;
      if (!frame.ok) {
        clearTimeout(entry.timer);
        pending.delete(frame.id);
        entry.reject(toError(frame.error ?? {}));
        return;
      }
      // Two-phase methods (`agent`) answer first with an acceptance, then with the final result.
      if (entry.expectFinal && frame.payload?.status === 'accepted') return;
      clearTimeout(entry.timer);
      pending.delete(frame.id);
      entry.resolve(frame.payload);
    } else if (frame?.type === 'event') {
      for (const handler of handlers) handler(frame.event, frame.payload, frame.seq);
    }
  });
  socket.on('close', (code, reason) => {
    failAll(
      new SystemError({
        code: CliErrorCodes.gatewayClosed,
        message: `gateway closed the connection (${code} ${String(reason)})`,
      }),
    );
  });

  const call = <T>(
    method: string,
    params: Record<string, unknown> = {},
    callOptions: { expectFinal?: boolean; timeoutMs?: number } = {},
  ) =>
    new Promise<T>((resolve, reject) => {
      if (socket.readyState !== WebSocket.OPEN) {
        reject(
          new SystemError({ code: CliErrorCodes.gatewayClosed, message: 'the gateway connection is closed' }),
        );
        return;
      }
      const id = `agentd-${nextId++}`;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(
          new SystemError({
            code: ErrorCodes.timeout,
            message: `${method} got no answer within ${callOptions.timeoutMs ?? timeoutMs} ms`,
          }),
        );
      }, callOptions.timeoutMs ?? timeoutMs);
      pending.set(id, {
        resolve: resolve as (value: unknown) => void,
        reject,
        expectFinal: callOptions.expectFinal ?? false,
        timer,
      });
      socket.send(JSON.stringify({ type: 'req', id, method, params }));
    });

  await challenge;
  const protocol = options.protocol ?? 4;
  let hello: HelloOk;
  try {
    hello = await call<HelloOk>('connect', {
      minProtocol: protocol,
      maxProtocol: protocol,
      client: {
        id: options.clientId ?? 'cli',
        version: 'agentd',
        platform: process.platform,
        mode: 'cli',
        instanceId: randomUUID(),
      },
      role: 'operator',
      scopes: options.scopes ?? ['operator.read', 'operator.write', 'operator.admin'],
      caps: ['tool-events'],
      auth: options.token ? { token: options.token } : {},
    });
  } catch (error) {
    socket.close();
    throw AgentdError.isInstance(error)
      ? error
      : new SystemError({ code: CliErrorCodes.gatewayConnectFailed, message: String(error) });
  }

  return {
    hello,
    call,
    onEvent(handler) {
      handlers.add(handler);
      return () => handlers.delete(handler);
    },
    close: () =>
      new Promise<void>((resolve) => {
        if (socket.readyState === WebSocket.CLOSED) return resolve();
        socket.once('close', () => resolve());
        socket.close(1000);
      }),
  };
}
