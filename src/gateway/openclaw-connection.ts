import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type WebSocket from 'ws';
import { ErrorCodes } from '../util/index.js';
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
import type { EventSink } from './event-hub.js';
import type { ClientInfo, MethodContext } from './method-table.js';
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
  const abort = new AbortController();
  const nonce = randomUUID();
  const remoteIsLoopback = isLoopbackAddress(request.socket.remoteAddress);
  const checkLiveness = createLiveness(ws);

  let phase: 'challenge' | 'authenticating' | 'connected' | 'closed' = 'challenge';
  let seq = 0;
  let protocol = maxProtocolVersion;
  let scopes: string[] = [];
  let caps = new Set<string>();
  let clientInfo: ClientInfo = { id: 'unknown' };

  /** The only writer of event frames: the frame is put together as text around the payload's JSON. */
  const sendEventJson = (event: string, payloadJson: string, droppable = false) => {
    if (phase !== 'connected') return;
    // A dropped event must not consume a sequence number, or the client would report a gap.
    if (droppable && out.behind) return;
    seq++;
    out.sendJson(`{"type":"event","event":${JSON.stringify(event)},"payload":${payloadJson},"seq":${seq}}`);
  };
  /** An event whose payload is an object (a payload given as undefined goes as null). */
  const sendEvent = (event: string, payload: unknown, droppable = false) =>
    sendEventJson(event, JSON.stringify(payload) ?? 'null', droppable);

  const sink: EventSink = {
    connId,
    get scopes() {
      return scopes;
    },
    onRunEvent(event) {
      const wire = toOpenClawRunEvent(event, { protocol, caps });
      if (wire) dispatcher.whenNotHolding(() => sendEventJson(wire.event, wire.payloadJson, wire.droppable));
    },
    onForwardedEvent(entry, event) {
      sendEvent(entry.wireName, entry.toPayload(event));
    },
    onSessionChange(change) {
      dispatcher.whenNotHolding(() => sendEvent('sessions.changed', sessionsChangedPayload(change)));
    },
  };

  const context: MethodContext = {
    connId,
    protocol: 'openclaw',
    get scopes() {
      return scopes;
    },
    get clientInfo() {
      return clientInfo;
    },
    sendEvent: (event, payload) => sendEvent(event, payload),
    watchSession: (sessionKey) => hub.watch(sink, sessionKey),
    subscribeSessions: (on) => hub.subscribeSessions(sink, on),
    sessionChanged: (change) => hub.sessionChanged(change),
    signal: abort.signal,
    logger,
  };

  const dispatcher = createOpenClawDispatcher({
    table,
    context,
    send: (frame) => out.send(frame),
    isOpen: () => out.open,
    ping: (token) => {
      ws.ping(token);
      // The run's events wait for the pong: the answer and the ping leave now, while the run goes on, rather
      // than behind the run's work at the end of this event-loop turn.
      out.flush();
    },
    maxPendingRequests: limits.maxPendingRequests,
    logger,
  });
  ws.on('pong', (data) => dispatcher.onPong(rawToString(data)));

  const connect = async (id: string, rawParams: unknown) => {
    const negotiated = await negotiateConnect(rawParams, { auth: deps.auth, nonce, clock, remoteIsLoopback });
    protocol = negotiated.protocol;
    scopes = negotiated.scopes;
    caps = negotiated.caps;
    clientInfo = negotiated.clientInfo;

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
      { clientId: clientInfo.id, clientMode: clientInfo.mode, protocol, scopes },
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
    abort.abort();
    hub.detach(sink);
    deps.onClose(connection);
  });
  ws.on('error', (error) => logger.debug({ err: error }, 'gateway: socket error'));

  out.send({ type: 'event', event: 'connect.challenge', payload: { nonce, ts: clock.now() } });
  return connection;
}
