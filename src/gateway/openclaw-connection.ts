import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type WebSocket from 'ws';
import { z } from 'zod';
import { ErrorCodes, formatZodIssues } from '../util/index.js';
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
import {
  type DeviceBlock,
  type DevicePairings,
  deviceTokenValid,
  issueDeviceToken,
  type PairedDevice,
  secretsEqual,
  verifyDeviceBlock,
} from './device-auth.js';
import type { EventSink, RunWireEvent, SessionChange } from './event-hub.js';
import { type ClientInfo, isAsyncResult, type MethodContext } from './method-table.js';
import { CloseCodes, createOutbound } from './outbound.js';
import { OperatorScopes, scopeSatisfied } from './scopes.js';
import { defaultAgentId, mainKey, mainSessionKey } from './session-key.js';

export const minProtocolVersion = 3;

/** The longest held run events wait for the pong that follows their acknowledgement. */
const heldEventsMaxWaitMs = 2_000;

/** Requests whose acknowledgement must precede the events of the run they start. */
const runStartingMethods = new Set(['chat.send', 'agent']);

/** OpenClaw's `sessions.changed` payload: the key, who owns it, why, and for runs the phase and run id. */
function sessionsChangedPayload(change: SessionChange): Record<string, unknown> {
  return {
    sessionKey: change.sessionKey,
    key: change.sessionKey,
    ...(change.agentId !== undefined ? { agentId: change.agentId } : {}),
    reason:
      change.reason === 'run' ? `agent.run.${change.phase === 'start' ? 'started' : 'ended'}` : change.reason,
    ...(change.phase !== undefined ? { phase: change.phase } : {}),
    ...(change.runId !== undefined ? { runId: change.runId } : {}),
    ...(change.sessionId !== undefined ? { sessionId: change.sessionId } : {}),
    updatedAt: change.ts,
    ts: change.ts,
  };
}
export const maxProtocolVersion = 4;

const knownOperatorScopes = new Set<string>([
  'operator.admin',
  'operator.read',
  'operator.write',
  'operator.sessions.read',
  'operator.sessions.write',
  'operator.approvals',
  'operator.questions',
  'operator.pairing',
  'operator.talk',
  'operator.talk.secrets',
]);

const requestFrame = z.looseObject({
  type: z.literal('req'),
  id: z.string().min(1).max(256),
  method: z.string().min(1).max(256),
  params: z.unknown().optional(),
});

const connectParams = z.looseObject({
  minProtocol: z.number().int(),
  maxProtocol: z.number().int(),
  client: z.looseObject({
    id: z.string().min(1).max(128),
    displayName: z.string().max(256).optional(),
    version: z.string().max(128).optional(),
    platform: z.string().max(128).optional(),
    deviceFamily: z.string().max(128).optional(),
    mode: z.string().max(64).optional(),
    instanceId: z.string().max(256).optional(),
  }),
  role: z.string().max(32).default('operator'),
  scopes: z.array(z.string().max(128)).max(64).optional(),
  caps: z.array(z.string().max(128)).max(64).default([]),
  auth: z
    .looseObject({
      token: z.string().max(4096).optional(),
      deviceToken: z.string().max(4096).optional(),
      password: z.string().max(4096).optional(),
    })
    .optional(),
  device: z
    .looseObject({
      id: z.string().max(256),
      publicKey: z.string().max(512),
      signature: z.string().max(1024),
      signedAt: z.number().int(),
      nonce: z.string().max(256).optional(),
    })
    .optional(),
});
type ConnectParams = z.infer<typeof connectParams>;

export interface OpenClawAuth {
  /** The shared gateway token; undefined only with `noAuth`. */
  token: string | undefined;
  noAuth: boolean;
  /** Key for device tokens; undefined when there is no gateway token to derive it from. */
  deviceSecret: Buffer | undefined;
  /** The role and scopes each paired device was given. */
  devices: DevicePairings;
}

/** How a connection authenticated, as `hello-ok.auth.method` reports it. */
type AuthMethod = 'none' | 'token' | 'device-token';

interface AuthResult {
  method: AuthMethod;
  scopes: string[];
  issued?: { deviceToken: string; issuedAtMs: number };
}

class HandshakeError extends Error {
  constructor(
    readonly wire: { code: string; message: string; retryable: boolean; details?: Record<string, unknown> },
    readonly closeCode: number,
  ) {
    super(wire.message);
  }
}

function authFailure(detailCode: string, authReason: string, message: string): HandshakeError {
  return new HandshakeError(
    {
      code: ErrorCodes.invalidRequest,
      message: `unauthorized: ${message}`,
      retryable: false,
      details: {
        code: detailCode,
        authReason,
        canRetryWithDeviceToken: false,
        recommendedNextStep: 'update_auth_credentials',
      },
    },
    CloseCodes.policyViolation,
  );
}

/**
 * One OpenClaw Gateway protocol connection (versions 3 and 4): challenge, connect, hello-ok, then req/res
 * and events. Requests become method-table calls; run events from the hub become `agent` and `chat` events.
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
  let pending = 0;

  /**
   * Run events wait until the client has read the answer to the request that started the run. The OpenClaw
   * TUI notes a run as its own when `chat.send` answers; if it read run events in the same chunk as that
   * answer, before its handler ran, it stayed "busy" forever — and a loaded client reads late, so the events
   * of a fast run often shared the chunk. So every run-starting answer is followed by a ping, and run events
   * are held from the request until that pong comes back: by then the client has read the answer. It costs
   * one round trip before a run's first event; OpenClaw's own gateway takes longer to start a run.
   */
  let unconfirmedAnswers = 0;
  const heldEvents: Array<() => void> = [];
  const awaitedPongs = new Map<string, () => void>();
  const whenNotHolding = (send: () => void) => {
    if (unconfirmedAnswers > 0) heldEvents.push(send);
    else send();
  };
  const confirmAnswer = () => {
    unconfirmedAnswers--;
    if (unconfirmedAnswers > 0) return;
    for (const send of heldEvents.splice(0)) send();
  };
  /** After the answer was written: ping, and confirm it on the pong (or after a while, for a client that never answers). */
  const awaitAnswerRead = () => {
    if (ws.readyState !== ws.OPEN) {
      confirmAnswer();
      return;
    }
    const token = randomUUID();
    const timer = setTimeout(() => settle(), heldEventsMaxWaitMs);
    timer.unref();
    const settle = () => {
      if (!awaitedPongs.delete(token)) return;
      clearTimeout(timer);
      confirmAnswer();
    };
    awaitedPongs.set(token, settle);
    ws.ping(token);
  };
  ws.on('pong', (data) => awaitedPongs.get(rawToString(data))?.());

  const sendEvent = (event: string, payload: unknown, droppable = false) => {
    if (phase !== 'connected') return;
    // A dropped event must not consume a sequence number, or the client would report a gap.
    if (droppable && out.behind) return;
    seq++;
    out.send({ type: 'event', event, payload, seq });
  };

  const sendResult = (id: string, payload: unknown, onWritten?: () => void) =>
    out.send({ type: 'res', id, ok: true, payload }, onWritten ? { onWritten } : {});
  const sendError = (id: string, error: ReturnType<typeof toWireError>, onWritten?: () => void) =>
    out.send({ type: 'res', id, ok: false, error }, onWritten ? { onWritten } : {});

  const chatMessage = (text: string, ts: number) => ({
    role: 'assistant',
    content: [{ type: 'text', text }],
    timestamp: ts,
  });

  const onRunEvent = (event: RunWireEvent) => whenNotHolding(() => sendRunEvent(event));

  const sendRunEvent = (event: RunWireEvent) => {
    const { run } = event;
    const base = { runId: run.runId, sessionKey: run.sessionKey, agentId: run.agentId };
    switch (event.kind) {
      case 'lifecycle': {
        const data =
          event.phase === 'start'
            ? { phase: 'start', startedAt: event.startedAt }
            : {
                phase: event.phase,
                startedAt: event.startedAt,
                endedAt: event.endedAt,
                aborted: event.status === 'aborted',
                stopReason: event.stopReason,
                ...(event.error ? { error: event.error.message, errorCode: event.error.code } : {}),
              };
        sendEvent('agent', { ...base, stream: 'lifecycle', data, seq: run.seq, ts: run.ts });
        return;
      }
      case 'assistant':
        sendEvent('agent', {
          ...base,
          stream: 'assistant',
          data: { text: event.text, delta: event.delta },
          seq: run.seq,
          ts: run.ts,
        });
        return;
      case 'tool':
        if (!caps.has('tool-events')) return;
        sendEvent('agent', {
          ...base,
          stream: 'tool',
          data: {
            phase: event.phase,
            name: event.toolName,
            toolCallId: event.toolCallId,
            ...(event.args !== undefined ? { args: event.args } : {}),
            ...(event.isError !== undefined ? { isError: event.isError } : {}),
            ...(event.durationMs !== undefined ? { durationMs: event.durationMs } : {}),
          },
          seq: run.seq,
          ts: run.ts,
        });
        return;
      case 'chat-delta':
        // v3 deltas are cumulative snapshots, so skipping one for a slow client loses nothing; v4 clients
        // append `deltaText`, so theirs are never dropped.
        sendEvent(
          'chat',
          {
            ...base,
            seq: run.seq,
            state: 'delta',
            ...(protocol >= 4
              ? { deltaText: event.deltaText, ...(event.replace ? { replace: true } : {}) }
              : {}),
            message: chatMessage(event.text, run.ts),
          },
          protocol < 4,
        );
        return;
      case 'chat-end':
        sendEvent('chat', {
          ...base,
          seq: run.seq,
          state: event.state,
          stopReason: event.stopReason,
          ...(event.state !== 'error' || event.text ? { message: chatMessage(event.text, run.ts) } : {}),
          ...(event.errorMessage !== undefined
            ? { errorMessage: event.errorMessage, errorKind: event.errorKind }
            : {}),
        });
        return;
    }
  };

  const sink: EventSink = {
    connId,
    get scopes() {
      return scopes;
    },
    onRunEvent,
    onForwardedEvent(entry, event) {
      sendEvent(entry.wireName, entry.toPayload(event));
    },
    onSessionChange(change) {
      whenNotHolding(() => sendEvent('sessions.changed', sessionsChangedPayload(change)));
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

  const authenticate = async (
    params: ConnectParams,
    role: string,
    requestedScopes: string[],
  ): Promise<AuthResult> => {
    const { auth } = deps;
    const token = params.auth?.token ?? params.auth?.password;
    const deviceToken = params.auth?.deviceToken;
    let method: AuthMethod = auth.noAuth ? 'none' : 'token';
    let paired: PairedDevice | undefined;
    if (!auth.noAuth) {
      const sharedOk = token !== undefined && auth.token !== undefined && secretsEqual(token, auth.token);
      if (!sharedOk) {
        if (deviceToken !== undefined && params.device !== undefined && auth.deviceSecret !== undefined) {
          const record = await auth.devices.get(params.device.id);
          if (record && record.role === role && deviceTokenValid(auth.deviceSecret, record, deviceToken)) {
            paired = record;
            method = 'device-token';
          }
        }
        if (method !== 'device-token') {
          if (token !== undefined) {
            throw authFailure(
              'AUTH_TOKEN_MISMATCH',
              'token_mismatch',
              "gateway token mismatch (use this gateway's token: AGENTD_GATEWAY_TOKEN)",
            );
          }
          if (deviceToken !== undefined) {
            throw authFailure('AUTH_DEVICE_TOKEN_MISMATCH', 'device_token_mismatch', 'device token mismatch');
          }
          throw authFailure('AUTH_TOKEN_MISSING', 'token_missing', 'gateway token missing (set auth.token)');
        }
      }
    }
    const known = [...new Set(requestedScopes.filter((scope) => knownOperatorScopes.has(scope)))];
    // A device token never grants more than the device was paired with, whatever the client asks for now.
    const pairedScopes = paired?.scopes;
    const scopes = pairedScopes ? known.filter((scope) => scopeSatisfied(scope, pairedScopes)) : known;
    if (!params.device) return { method, scopes };
    const verdict = verifyDeviceBlock({
      device: params.device as DeviceBlock,
      challengeNonce: nonce,
      nowMs: clock.now(),
      clientId: params.client.id,
      clientMode: params.client.mode ?? '',
      role,
      scopes: requestedScopes,
      tokens: [token, deviceToken].filter((value): value is string => value !== undefined),
      platform: params.client.platform,
      deviceFamily: params.client.deviceFamily,
    });
    if (!verdict.ok) {
      throw new HandshakeError(
        {
          code: ErrorCodes.invalidRequest,
          message: verdict.message,
          retryable: false,
          details: { code: verdict.code },
        },
        CloseCodes.policyViolation,
      );
    }
    // agentd has no pairing queue: a verified device is paired when it proves it holds the gateway token
    // (or connects from loopback to a --no-auth gateway), with the scopes that connection was granted.
    const approved = paired !== undefined || !auth.noAuth || remoteIsLoopback;
    if (!approved || !auth.deviceSecret) return { method, scopes };
    if (!paired) {
      paired = { deviceId: params.device.id, role, scopes, pairedAtMs: clock.now() };
      await auth.devices.put(paired);
    }
    return {
      method,
      scopes,
      issued: {
        deviceToken: issueDeviceToken(auth.deviceSecret, paired.deviceId, paired.role, paired.scopes),
        issuedAtMs: clock.now(),
      },
    };
  };

  const connect = async (id: string, rawParams: unknown) => {
    const parsed = connectParams.safeParse(rawParams);
    if (!parsed.success) {
      throw new HandshakeError(
        {
          code: ErrorCodes.invalidRequest,
          message: `invalid connect params: ${formatZodIssues(parsed.error.issues)}`,
          retryable: false,
        },
        CloseCodes.policyViolation,
      );
    }
    const params = parsed.data;
    const low = Math.max(params.minProtocol, minProtocolVersion);
    const high = Math.min(params.maxProtocol, maxProtocolVersion);
    if (low > high) {
      throw new HandshakeError(
        {
          code: ErrorCodes.invalidRequest,
          message: `protocol mismatch: agentd speaks protocol ${minProtocolVersion}..${maxProtocolVersion}, the client ${params.minProtocol}..${params.maxProtocol}`,
          retryable: false,
          details: {
            code: 'PROTOCOL_MISMATCH',
            expectedProtocol: maxProtocolVersion,
            minProtocol: minProtocolVersion,
            maxProtocol: maxProtocolVersion,
          },
        },
        CloseCodes.protocolError,
      );
    }
    const role = params.role;
    if (role !== 'operator') {
      throw new HandshakeError(
        {
          code: ErrorCodes.invalidRequest,
          message: `role ${JSON.stringify(role)} is not supported; agentd accepts operator clients`,
          retryable: false,
          details: { code: 'ROLE_UNSUPPORTED' },
        },
        CloseCodes.policyViolation,
      );
    }
    const requestedScopes = params.scopes ?? [OperatorScopes.read, OperatorScopes.write];
    const authResult = await authenticate(params, role, requestedScopes);

    protocol = high;
    scopes = authResult.scopes;
    caps = new Set(params.caps);
    clientInfo = {
      id: params.client.id,
      ...(params.client.version !== undefined ? { version: params.client.version } : {}),
      ...(params.client.platform !== undefined ? { platform: params.client.platform } : {}),
      ...(params.client.mode !== undefined ? { mode: params.client.mode } : {}),
      ...(params.client.displayName !== undefined ? { displayName: params.client.displayName } : {}),
      ...(params.client.instanceId !== undefined ? { instanceId: params.client.instanceId } : {}),
    };

    let health: Record<string, unknown>;
    try {
      health = await deps.services.health.health();
    } catch (error) {
      logger.warn({ err: error }, 'gateway: health snapshot failed during connect');
      health = { ok: false };
    }
    if (phase !== 'authenticating') return;
    const hello = {
      type: 'hello-ok',
      protocol,
      server: { version: deps.serverVersion, connId },
      features: { methods: table.list(), events: table.events() },
      snapshot: {
        presence: [],
        health,
        stateVersion: { presence: 0, health: 0 },
        uptimeMs: clock.now() - deps.startedAt,
        sessionDefaults: {
          defaultAgentId,
          mainKey,
          mainSessionKey: mainSessionKey(defaultAgentId),
          scope: 'per-sender',
        },
        authMode: deps.auth.noAuth ? 'none' : 'token',
      },
      auth: { method: authResult.method, role, scopes, ...(authResult.issued ?? {}) },
      policy: {
        maxPayload: limits.maxFrameBytes,
        maxBufferedBytes: limits.maxBufferedBytes,
        tickIntervalMs: limits.tickIntervalMs,
      },
    };
    phase = 'connected';
    clearTimeout(handshakeTimer);
    hub.attach(sink);
    sendResult(id, hello);
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
        sendError(parsed.data.id, {
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
        sendError(id, error.wire);
        out.close(error.closeCode, error.message);
        return;
      }
      sendError(id, toWireError(error, logger));
      out.close(CloseCodes.internalError, 'connect failed');
    });
  };

  const runRequest = async (id: string, method: string, params: unknown) => {
    const startsRun = runStartingMethods.has(method);
    if (startsRun) unconfirmedAnswers++;
    let answered = !startsRun;
    const onAnswerWritten = () => {
      if (answered) return;
      answered = true;
      awaitAnswerRead();
    };
    try {
      const result = await table.invoke(method, params, context);
      if (!isAsyncResult(result)) {
        sendResult(id, result, startsRun ? onAnswerWritten : undefined);
        return;
      }
      sendResult(id, result.accepted, startsRun ? onAnswerWritten : undefined);
      // The final answer follows the run's events, which may still be held.
      try {
        const final = await result.final;
        whenNotHolding(() => sendResult(id, final));
      } catch (error) {
        const wire = toWireError(error, logger);
        whenNotHolding(() => sendError(id, wire));
      }
    } catch (error) {
      sendError(id, toWireError(error, logger), startsRun ? onAnswerWritten : undefined);
    } finally {
      // A frame that could not be written (closed socket) never calls back; nothing is held forever.
      if (!out.open) onAnswerWritten();
    }
  };

  const onRequestFrame = (text: string) => {
    let frame: unknown;
    try {
      frame = JSON.parse(text);
    } catch {
      // OpenClaw answers nothing to a frame that is not JSON and keeps the connection; so does agentd.
      logger.debug({ bytes: text.length }, 'gateway: ignored a frame that is not JSON');
      return;
    }
    const parsed = requestFrame.safeParse(frame);
    if (!parsed.success) {
      const id = (frame as { id?: unknown } | null)?.id;
      if (typeof id === 'string' && id.length > 0 && id.length <= 256) {
        sendError(id, {
          code: ErrorCodes.invalidRequest,
          message: `invalid request frame: ${formatZodIssues(parsed.error.issues)}`,
          retryable: false,
        });
      } else {
        logger.debug({}, 'gateway: ignored a frame that is not a request');
      }
      return;
    }
    const { id, method, params } = parsed.data;
    if (method === 'connect') {
      sendError(id, { code: ErrorCodes.invalidRequest, message: 'already connected', retryable: false });
      return;
    }
    if (pending >= limits.maxPendingRequests) {
      sendError(id, {
        code: 'UNAVAILABLE',
        message: `too many requests in flight on this connection (limit ${limits.maxPendingRequests})`,
        retryable: true,
      });
      return;
    }
    pending++;
    runRequest(id, method, params).finally(() => {
      pending--;
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
    else if (phase === 'connected') onRequestFrame(text);
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
    for (const settle of [...awaitedPongs.values()]) settle();
    clearTimeout(handshakeTimer);
    abort.abort();
    hub.detach(sink);
    deps.onClose(connection);
  });
  ws.on('error', (error) => logger.debug({ err: error }, 'gateway: socket error'));

  out.send({ type: 'event', event: 'connect.challenge', payload: { nonce, ts: clock.now() } });
  return connection;
}
