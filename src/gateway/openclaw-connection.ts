import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type WebSocket from 'ws';
import { ErrorCodes, LazyAbortController, type Logger } from '../util/index.js';
import {
  type ConnectionDeps,
  closeGraceMs,
  createLiveness,
  type GatewayConnection,
  isLoopbackAddress,
  rawByteLength,
  rawToString,
  toWireError,
} from './connection.js';
import type { EventHub, EventSink } from './event-hub.js';
import type { ClientInfo, MethodContext, SessionChangeNotice } from './method-table.js';
import { createOpenClawDispatcher, requestFrame } from './openclaw-dispatch.js';
import { sessionsChangedPayload, toOpenClawRunEvent } from './openclaw-events.js';
import {
  HandshakeError,
  helloOkPayload,
  maxProtocolVersion,
  negotiateConnect,
  type OpenClawAuth,
} from './openclaw-handshake.js';
import { CloseCodes, createOutbound } from './outbound.js';

/**
 * What the methods of one connection are called with. A class, so that every connection's context shares one
 * hidden class and its methods (an object literal with a getter is made in dictionary mode, with a hidden
 * class of its own), and so that the signal is made only for a method that asks for it: most connections
 * never call one that does, and Node makes an AbortSignal slowly and with a hidden class of its own each.
 * What the connect negotiates is written into `scopes` and `clientInfo`.
 */
class OpenClawMethodContext implements MethodContext {
  readonly protocol = 'openclaw';
  scopes: ReadonlyArray<string> = [];
  clientInfo: ClientInfo = { id: 'unknown' };
  readonly #closed = new LazyAbortController();

  constructor(
    readonly connId: string,
    readonly logger: Logger,
    private readonly hub: EventHub,
    private readonly sink: EventSink,
    private readonly send: (event: string, payload: unknown) => void,
  ) {}

  get signal(): AbortSignal {
    return this.#closed.signal;
  }

  sendEvent(event: string, payload: unknown): void {
    this.send(event, payload);
  }

  watchSession(sessionKey: string): void {
    this.hub.watch(this.sink, sessionKey);
  }

  subscribeSessions(on: boolean): void {
    this.hub.subscribeSessions(this.sink, on);
  }

  sessionChanged(change: SessionChangeNotice): void {
    this.hub.sessionChanged(change);
  }

  /** The connection closed. */
  close(): void {
    this.#closed.abort();
  }
}

/**
 * One OpenClaw Gateway protocol connection (versions 3 and 4): it sends the challenge, hands the first frame
 * to the handshake (openclaw-handshake.ts), then every frame to the dispatcher (openclaw-dispatch.ts), and
 * turns hub events into OpenClaw events (openclaw-events.ts). This function only owns the connection's
 * state: its phase, its sequence numbers and what the client negotiated.
 */
export function acceptOpenClawConnection(
  ws: WebSocket,
  request: IncomingMessage,
  deps: ConnectionDeps & { auth: OpenClawAuth },
): GatewayConnection {
  const { table, hub, limits, clock } = deps;
  const connId = deps.idGenerator('conn');
  const logger = deps.logger.child({ connId, protocol: 'openclaw' });
  const out = createOutbound(ws, { maxBufferedBytes: limits.maxBufferedBytes, closeGraceMs, logger });
  const nonce = randomUUID();
  const remoteIsLoopback = isLoopbackAddress(request.socket.remoteAddress);
  const checkLiveness = createLiveness(ws);

  let phase: 'challenge' | 'authenticating' | 'connected' | 'closed' = 'challenge';
  let seq = 0;
  let protocol = maxProtocolVersion;
  let caps = new Set<string>();

  /** The only writer of event frames: the frame is put together as text around the payload's JSON. */
  const sendEventJson = (event: string, payloadJson: string, droppable = false) => {
    if (phase !== 'connected') return;
    // A dropped event must not consume a sequence number, or the client would report a gap.
    if (droppable && out.isBehind()) return;
    seq++;
    out.sendJson(`{"type":"event","event":${JSON.stringify(event)},"payload":${payloadJson},"seq":${seq}}`);
  };
  /** An event whose payload is an object (a payload given as undefined goes as null). */
  const sendEvent = (event: string, payload: unknown, droppable = false) =>
    sendEventJson(event, JSON.stringify(payload) ?? 'null', droppable);

  // What the connect negotiates is written into `sink` as a plain property, not read through a getter (see
  // OpenClawMethodContext): the hub reads it for every event it delivers.
  const sink = {
    connId,
    scopes: [] as ReadonlyArray<string>,
    onRunEvent(event) {
      const wire = toOpenClawRunEvent(event, { protocol, caps });
      if (!wire) return;
      dispatcher.whenNotHolding(
        () => sendEventJson(wire.event, wire.payloadJson, wire.droppable),
        wire.payloadJson.length,
      );
    },
    onForwardedEvent(entry, event) {
      sendEvent(entry.wireName, entry.toPayload(event));
    },
    onSessionChange(change) {
      const payloadJson = JSON.stringify(sessionsChangedPayload(change));
      dispatcher.whenNotHolding(() => sendEventJson('sessions.changed', payloadJson), payloadJson.length);
    },
  } satisfies EventSink;

  const context = new OpenClawMethodContext(connId, logger, hub, sink, sendEvent);

  const dispatcher = createOpenClawDispatcher({
    table,
    context,
    send: (frame) => out.send(frame),
    isOpen: () => out.isOpen(),
    ping: (token) => {
      ws.ping(token);
      // The run's events wait for the pong: the answer and the ping leave now, while the run goes on, rather
      // than behind the run's work at the end of this event-loop turn.
      out.flush();
    },
    maxPendingRequests: limits.maxPendingRequests,
    maxHeldBytes: limits.maxBufferedBytes,
    // As the outbound writer treats a slow consumer: close 1008 and destroy the socket at once.
    overflow: (reason) => {
      out.close(CloseCodes.policyViolation, reason);
      ws.terminate();
    },
    logger,
  });
  ws.on('pong', (data) => dispatcher.onPong(rawToString(data)));

  const connect = async (id: string, rawParams: unknown) => {
    const negotiated = await negotiateConnect(rawParams, { auth: deps.auth, nonce, clock, remoteIsLoopback });
    protocol = negotiated.protocol;
    sink.scopes = negotiated.scopes;
    context.scopes = negotiated.scopes;
    caps = negotiated.caps;
    context.clientInfo = negotiated.clientInfo;

    let health: Record<string, unknown>;
    try {
      health = await deps.services.health.health();
    } catch (error) {
      logger.warn({ err: error }, 'gateway: health snapshot failed during connect');
      health = { ok: false };
    }
    if (phase !== 'authenticating') return;
    const hello = helloOkPayload({
      negotiated,
      connId,
      serverVersion: deps.serverVersion,
      methods: table.list(),
      events: table.events(),
      health,
      uptimeMs: clock.now() - deps.startedAt,
      noAuth: deps.auth.noAuth,
      limits,
    });
    phase = 'connected';
    clearTimeout(handshakeTimer);
    hub.attach(sink);
    dispatcher.sendResult(id, hello);
    logger.info(
      {
        clientId: context.clientInfo.id,
        clientMode: context.clientInfo.mode,
        protocol,
        scopes: context.scopes,
      },
      'gateway: client connected',
    );
  };

  const onHandshakeFrame = (text: string) => {
    let frame: unknown;
    try {
      frame = JSON.parse(text);
    } catch {
      out.close(CloseCodes.policyViolation, 'invalid handshake: the first frame must be a connect request');
      return;
    }
    const parsed = requestFrame.safeParse(frame);
    if (!parsed.success || parsed.data.method !== 'connect') {
      if (parsed.success) {
        dispatcher.sendError(parsed.data.id, {
          code: ErrorCodes.invalidRequest,
          message: 'invalid handshake: the first request must be connect',
          retryable: false,
        });
      }
      out.close(CloseCodes.policyViolation, 'invalid handshake: the first frame must be a connect request');
      return;
    }
    phase = 'authenticating';
    const { id } = parsed.data;
    connect(id, parsed.data.params).catch((error: unknown) => {
      if (error instanceof HandshakeError) {
        logger.info({ detail: error.wire.details?.code, message: error.message }, 'gateway: connect refused');
        dispatcher.sendError(id, error.wire);
        out.close(error.closeCode, error.message);
        return;
      }
      dispatcher.sendError(id, toWireError(error, logger));
      out.close(CloseCodes.internalError, 'connect failed');
    });
  };

  ws.on('message', (data, isBinary) => {
    if (phase === 'closed') return;
    if (phase === 'challenge' && rawByteLength(data) > limits.preConnectMaxBytes) {
      out.close(CloseCodes.messageTooBig, `pre-connect frame larger than ${limits.preConnectMaxBytes} bytes`);
      return;
    }
    if (isBinary) {
      logger.debug({}, 'gateway: ignored a binary frame');
      if (phase === 'challenge') out.close(CloseCodes.policyViolation, 'invalid handshake: binary frame');
      return;
    }
    const text = rawToString(data);
    if (phase === 'challenge') onHandshakeFrame(text);
    else if (phase === 'connected') dispatcher.onFrame(text);
    else logger.debug({}, 'gateway: ignored a frame sent during authentication');
  });

  const handshakeTimer = setTimeout(() => {
    if (phase === 'challenge' || phase === 'authenticating')
      out.close(CloseCodes.policyViolation, 'handshake timeout');
  }, limits.handshakeTimeoutMs);
  handshakeTimer.unref();

  const connection: GatewayConnection = {
    connId,
    protocol: 'openclaw',
    socket: ws,
    tick() {
      checkLiveness();
      sendEvent('tick', { ts: clock.now() });
    },
    shutdown(reason) {
      sendEvent('shutdown', { reason });
      out.close(CloseCodes.goingAway, reason);
    },
  };

  ws.on('close', () => {
    phase = 'closed';
    dispatcher.close();
    clearTimeout(handshakeTimer);
    context.close();
    hub.detach(sink);
    deps.onClose(connection);
  });
  ws.on('error', (error) => logger.debug({ err: error }, 'gateway: socket error'));

  out.send({ type: 'event', event: 'connect.challenge', payload: { nonce, ts: clock.now() } });
  return connection;
}
