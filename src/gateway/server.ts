import { createServer, type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import type { Bus } from '../bus/index.js';
import type { Clock, IdGenerator, Logger } from '../util/index.js';
import {
  createIdGenerator,
  ErrorCodes,
  once,
  silentLogger,
  systemClock,
  UserInputError,
} from '../util/index.js';
import {
  type ConnectionDeps,
  defaultGatewayLimits,
  type GatewayConnection,
  type GatewayLimits,
} from './connection.js';
import {
  createMemoryDevicePairings,
  type DevicePairings,
  deviceTokenSecret,
  secretsEqual,
} from './device-auth.js';
import { createEventHub, type EventHub } from './event-hub.js';
import { isLoopbackHost, namesLoopbackServer, parseHostHeader } from './host-header.js';
import type { MethodTable } from './method-table.js';
import { acceptOpenClawConnection } from './openclaw-connection.js';
import { CloseCodes } from './outbound.js';
import type { GatewayServices } from './services.js';
import { isValidAgentId, resolveSessionKey } from './session-key.js';
import { acceptSpiderwebConnection, maxDeclaredCapabilities } from './spiderweb-connection.js';
import type { StaticSite } from './static-site.js';

export interface HttpRoute {
  method: string;
  /** Exact path, e.g. `/metrics`. */
  path: string;
  handler(request: IncomingMessage, response: ServerResponse): void | Promise<void>;
}

export interface GatewayServerOptions {
  host: string;
  port: number;
  /** Shared secret clients must present; required unless `noAuth`. */
  token?: string | undefined;
  /** Development only: no auth at all. Refused unless `host` is a loopback address. */
  noAuth?: boolean;
  /** Browser origins allowed besides the gateway's own host (`*` allows any). */
  allowedOrigins?: ReadonlyArray<string>;
  /**
   * `Host` header values answered besides the loopback names (`name` for any port, `name:port` for one).
   * When the gateway binds loopback, every other Host is refused (DNS rebinding); when it binds another
   * address, the check applies only once this list is non-empty.
   */
  allowedHosts?: ReadonlyArray<string>;
  limits?: Partial<GatewayLimits>;
  /** Where paired OpenClaw devices are kept; default in memory (pairings end with the process). */
  devicePairings?: DevicePairings;
  methodTable: MethodTable;
  bus: Bus;
  services: GatewayServices;
  httpRoutes?: ReadonlyArray<HttpRoute>;
  /** A built web page served on `GET /` and its assets (the dashboard). */
  staticSite?: StaticSite;
  logger?: Logger;
  clock?: Clock;
  idGenerator?: IdGenerator;
  serverVersion: string;
}

export interface GatewayServer {
  listen(): Promise<{ url: string }>;
  /** Stops accepting, tells clients (`shutdown` event, close 1001) and waits for every socket to close. */
  close(): Promise<void>;
  address(): AddressInfo | null;
  readonly connectionCount: number;
  /** The event fan-out, exposed for diagnostics and tests. */
  readonly hub: EventHub;
}

const spiderwebPath = /^\/v1\/agents\/([^/]+)\/stream\/?$/;
const sessionParams = ['session', 'sessionKey', 'sessionId', 'session_id', 'session-key'];

/** What `/health` tells callers without the token: enough for a probe, nothing about the installation. */
function healthSummary(
  health: Record<string, unknown>,
  version: string,
): { status: string; version: string } {
  const status = typeof health.status === 'string' ? health.status : health.ok === false ? 'error' : 'ok';
  return { status, version };
}

function writeJson(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  response.end(text);
}

/** Refuses an upgrade with a plain HTTP response; browsers and ws clients both surface the status. */
function rejectUpgrade(
  socket: Duplex,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  const body = JSON.stringify({ error: { code: STATUS_CODES[status], message } });
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ];
  socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`);
}

function bearerToken(request: IncomingMessage, url: URL): string | undefined {
  const header = request.headers.authorization;
  if (header?.startsWith('Bearer ')) return header.slice('Bearer '.length).trim();
  return url.searchParams.get('token') ?? undefined;
}

/**
 * The gateway: one HTTP server, two WebSocket protocols on it (OpenClaw on `/` and `/ws`, Spiderweb on
 * `/v1/agents/{agentId}/stream`), `GET /health`, and whatever extra routes the runtime adds.
 */
export function createGatewayServer(options: GatewayServerOptions): GatewayServer {
  const limits: GatewayLimits = { ...defaultGatewayLimits, ...options.limits };
  const logger = (options.logger ?? silentLogger).child({ component: 'gateway' });
  const clock = options.clock ?? systemClock;
  const idGenerator = options.idGenerator ?? createIdGenerator();
  const noAuth = options.noAuth ?? false;
  const token = options.token || undefined;
  if (noAuth && !isLoopbackHost(options.host)) {
    throw new UserInputError({
      code: ErrorCodes.invalidConfig,
      message: `--no-auth is only allowed on a loopback address, not ${options.host}; set a gateway token instead.`,
    });
  }
  if (!noAuth && !token) {
    throw new UserInputError({
      code: ErrorCodes.invalidConfig,
      message: 'the gateway needs a token (AGENTD_TOKEN); use --no-auth only for loopback development.',
    });
  }
  const allowedOrigins = new Set(options.allowedOrigins ?? []);
  const allowedHosts = (options.allowedHosts ?? []).map((entry) => {
    const parsed = parseHostHeader(entry);
    if (!parsed) {
      throw new UserInputError({
        code: ErrorCodes.invalidConfig,
        message: `gateway.allowedHosts: "${entry}" is not a host name (use name or name:port)`,
      });
    }
    return parsed;
  });
  // A browser page can point any DNS name at 127.0.0.1 (DNS rebinding), but it cannot change the Host header
  // its requests carry. On loopback, only our own names are ours; elsewhere the operator lists them.
  const checkHost = isLoopbackHost(options.host) || allowedHosts.length > 0;
  const { methodTable: table, bus, services } = options;
  table.declareEvents(['connect.challenge', 'tick', 'shutdown']);

  const hub = createEventHub({ bus, table, clock, logger });
  const connections = new Set<GatewayConnection>();
  let upgrading = 0;
  const startedAt = clock.now();
  const routes = options.httpRoutes ?? [];
  const openClawAuth = {
    token,
    noAuth,
    deviceSecret: token ? deviceTokenSecret(token) : undefined,
    devices: options.devicePairings ?? createMemoryDevicePairings(),
  };

  const deps: ConnectionDeps = {
    table,
    hub,
    services,
    limits,
    serverVersion: options.serverVersion,
    clock,
    idGenerator,
    logger,
    startedAt,
    onClose: (connection) => {
      connections.delete(connection);
    },
  };

  // One object for every OpenClaw connection: spread per connection, each copy got a hidden class of its own.
  const openClawDeps = { ...deps, auth: openClawAuth };

  const hostAllowed = (request: IncomingMessage): boolean => {
    if (!checkHost) return true;
    const header = request.headers.host;
    const parsed = header ? parseHostHeader(header) : undefined;
    if (!parsed) return false;
    const listeningPort = String((httpServer.address() as AddressInfo | null)?.port ?? options.port);
    const port = parsed.port || '80';
    if (namesLoopbackServer(parsed, listeningPort)) return true;
    return allowedHosts.some(
      (entry) => entry.hostname === parsed.hostname && (entry.port === '' || entry.port === port),
    );
  };
  const hostRefusal = (request: IncomingMessage) => {
    logger.warn({ host: request.headers.host }, 'gateway: request refused, Host not allowed');
    return `host ${JSON.stringify(request.headers.host ?? '')} is not served here; add it to gateway.allowedHosts`;
  };
  /** Full health to token holders (and on a --no-auth gateway); only the status to everyone else. */
  const healthVisibleInFull = (request: IncomingMessage, url: URL): boolean => {
    if (noAuth) return true;
    const presented = bearerToken(request, url);
    return presented !== undefined && secretsEqual(presented, token as string);
  };

  const httpServer = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://gateway');
    if (!hostAllowed(request)) {
      writeJson(response, 421, { error: { code: ErrorCodes.forbidden, message: hostRefusal(request) } });
      return;
    }
    if (request.method === 'GET' && url.pathname === '/health') {
      const full = healthVisibleInFull(request, url);
      Promise.resolve(services.health.health()).then(
        (health) => writeJson(response, 200, full ? health : healthSummary(health, options.serverVersion)),
        (error: unknown) => {
          logger.error({ err: error }, 'gateway: health check failed');
          writeJson(response, 503, { ok: false });
        },
      );
      return;
    }
    const route = routes.find(
      (candidate) => candidate.method === request.method && candidate.path === url.pathname,
    );
    if (route) {
      Promise.resolve(route.handler(request, response)).catch((error: unknown) => {
        logger.error({ err: error, path: url.pathname }, 'gateway: HTTP route failed');
        if (!response.headersSent)
          writeJson(response, 500, { error: { code: ErrorCodes.internal, message: 'internal error' } });
        else response.end();
      });
      return;
    }
    if (options.staticSite?.handle(request, response)) return;
    writeJson(response, 404, {
      error: { code: ErrorCodes.notFound, message: `no route for ${request.method} ${url.pathname}` },
    });
  });

  // Until a socket has sent a complete request head it holds a slot and gives nothing; Node's own
  // headersTimeout is only checked every connectionsCheckingInterval, so each socket gets its own timer.
  const firstRequestTimers = new WeakMap<Duplex, ReturnType<typeof setTimeout>>();
  const requestArrived = (socket: Duplex) => {
    clearTimeout(firstRequestTimers.get(socket));
    firstRequestTimers.delete(socket);
  };
  // The listeners every socket keeps for its whole life are shared functions, told their socket by `this`:
  // a closure made per socket would be kept per connection, with the context it was made in (the upgrade's
  // request, its headers and URL).
  function closedBeforeRequest(this: Duplex) {
    requestArrived(this);
  }
  const upgradeSocketError = (error: Error) => logger.debug({ err: error }, 'gateway: upgrade socket error');
  httpServer.headersTimeout = limits.requestTimeoutMs;
  httpServer.requestTimeout = limits.requestTimeoutMs;
  httpServer.on('connection', (socket: Socket) => {
    const timer = setTimeout(() => {
      logger.debug({ remote: socket.remoteAddress }, 'gateway: closed a socket that sent no request in time');
      socket.destroy();
    }, limits.requestTimeoutMs);
    timer.unref();
    firstRequestTimers.set(socket, timer);
    socket.once('close', closedBeforeRequest);
  });
  httpServer.on('request', (request: IncomingMessage) => requestArrived(request.socket));

  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: limits.maxFrameBytes,
    perMessageDeflate: false,
    clientTracking: false,
  });

  /** Browsers always send Origin; other clients usually do not, and are judged by their credentials alone. */
  const originAllowed = (request: IncomingMessage): boolean => {
    const origin = request.headers.origin;
    if (origin === undefined || allowedOrigins.has('*') || allowedOrigins.has(origin)) return true;
    try {
      return new URL(origin).host === request.headers.host;
    } catch {
      return false;
    }
  };

  httpServer.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    requestArrived(socket);
    socket.on('error', upgradeSocketError);
    const url = new URL(request.url ?? '/', 'http://gateway');
    const spiderweb = spiderwebPath.exec(url.pathname);
    const isOpenClaw = url.pathname === '/' || url.pathname === '/ws';
    if (!hostAllowed(request)) return rejectUpgrade(socket, 421, hostRefusal(request));
    if (!spiderweb && !isOpenClaw)
      return rejectUpgrade(socket, 404, `no WebSocket endpoint at ${url.pathname}`);
    if (closing.started) return rejectUpgrade(socket, 503, 'the gateway is shutting down');
    if (connections.size + upgrading >= limits.maxConnections) {
      logger.warn({ maxConnections: limits.maxConnections }, 'gateway: connection refused, at the limit');
      return rejectUpgrade(socket, 503, `connection limit reached (${limits.maxConnections})`, {
        'Retry-After': '5',
      });
    }
    if (!originAllowed(request)) {
      logger.warn({ origin: request.headers.origin }, 'gateway: connection refused, origin not allowed');
      return rejectUpgrade(socket, 403, 'origin not allowed');
    }

    let spiderwebSession: { agentId: string; sessionKey: string; capabilities: string[] } | undefined;
    if (spiderweb) {
      if (!noAuth) {
        const presented = bearerToken(request, url);
        if (presented === undefined || !secretsEqual(presented, token as string)) {
          return rejectUpgrade(
            socket,
            401,
            'unauthorized: pass the gateway token as Authorization: Bearer or ?token=',
            {
              'WWW-Authenticate': 'Bearer',
            },
          );
        }
      }
      let agentId: string;
      try {
        agentId = decodeURIComponent(spiderweb[1] as string);
      } catch {
        return rejectUpgrade(socket, 400, 'invalid agent id');
      }
      if (!isValidAgentId(agentId)) return rejectUpgrade(socket, 400, 'invalid agent id');
      const rawSession =
        sessionParams.map((name) => url.searchParams.get(name)).find((value) => value) ?? 'main';
      try {
        const resolved = resolveSessionKey(rawSession, agentId);
        if (resolved.agentId !== agentId)
          return rejectUpgrade(socket, 400, 'the session belongs to another agent');
        const capabilities = (url.searchParams.get('capabilities') ?? '')
          .split(',')
          .map((value) => value.trim())
          .filter((value) => value.length > 0 && value.length <= 64);
        spiderwebSession = {
          agentId,
          sessionKey: resolved.sessionKey,
          capabilities: [...new Set(capabilities)].slice(0, maxDeclaredCapabilities),
        };
      } catch (error) {
        return rejectUpgrade(socket, 400, (error as Error).message);
      }
    }

    upgrading++;
    wss.handleUpgrade(request, socket, head, (ws) => {
      upgrading--;
      if (closing.started) {
        ws.close(CloseCodes.goingAway, 'the gateway is shutting down');
        return;
      }
      const connection = spiderwebSession
        ? acceptSpiderwebConnection(ws, spiderwebSession, deps)
        : acceptOpenClawConnection(ws, request, openClawDeps);
      connections.add(connection);
    });
  });

  let tickTimer: ReturnType<typeof setInterval> | undefined;
  /**
   * The gateway's close: no new connection, each one told and closed, then the HTTP server. Every caller of
   * `close` hears of it once it is done, however many call it.
   */
  const closing = once(async () => {
    if (tickTimer) clearInterval(tickTimer);
    const stopped = new Promise<void>((resolve) => {
      if (!httpServer.listening) resolve();
      else httpServer.close(() => resolve());
    });
    const closed = [...connections].map(
      (connection) =>
        new Promise<void>((resolve) => {
          connection.socket.once('close', () => resolve());
          connection.shutdown('the gateway is shutting down');
        }),
    );
    await Promise.all(closed);
    httpServer.closeAllConnections();
    await stopped;
    hub.close();
    wss.close();
  });

  return {
    async listen() {
      await new Promise<void>((resolve, reject) => {
        httpServer.once('error', reject);
        httpServer.listen(options.port, options.host, () => {
          httpServer.off('error', reject);
          resolve();
        });
      });
      tickTimer = setInterval(() => {
        for (const connection of connections) connection.tick();
      }, limits.tickIntervalMs);
      tickTimer.unref();
      const address = httpServer.address() as AddressInfo;
      const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      logger.info(
        { host: address.address, port: address.port, auth: noAuth ? 'none' : 'token' },
        'gateway: listening',
      );
      return { url: `ws://${host}:${address.port}` };
    },
    close: closing.run,
    address: () => httpServer.address() as AddressInfo | null,
    get connectionCount() {
      return connections.size;
    },
    hub,
  };
}
