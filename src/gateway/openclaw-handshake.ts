import { z } from 'zod';
import type { Clock } from '../util/index.js';
import { ErrorCodes, formatZodIssues } from '../util/index.js';
import {
  type DeviceBlock,
  type DevicePairings,
  deviceTokenValid,
  issueDeviceToken,
  type PairedDevice,
  secretsEqual,
  verifyDeviceBlock,
} from './device-auth.js';
import { GatewayErrorCodes } from './error-codes.js';
import type { ClientInfo } from './method-table.js';
import { CloseCodes } from './outbound.js';
import { OperatorScopes, scopeSatisfied } from './scopes.js';
import { defaultAgentId, mainKey, mainSessionKey } from './session-key.js';

export const minProtocolVersion = 3;
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

export class HandshakeError extends Error {
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

/** What a connection's handshake needs besides the `connect` params. */
export interface HandshakeContext {
  auth: OpenClawAuth;
  /** The nonce of this connection's `connect.challenge`, which a device block must sign. */
  nonce: string;
  clock: Clock;
  remoteIsLoopback: boolean;
}

/** An accepted `connect`: what the connection speaks, who the client is and what it may do. */
export interface NegotiatedConnection {
  protocol: number;
  role: string;
  scopes: string[];
  caps: Set<string>;
  clientInfo: ClientInfo;
  authMethod: AuthMethod;
  issued?: { deviceToken: string; issuedAtMs: number };
}

async function authenticate(
  params: ConnectParams,
  role: string,
  requestedScopes: string[],
  context: HandshakeContext,
): Promise<AuthResult> {
  const { auth, nonce, clock, remoteIsLoopback } = context;
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
            GatewayErrorCodes.authTokenMismatch,
            'token_mismatch',
            "gateway token mismatch (use this gateway's token: AGENTD_TOKEN)",
          );
        }
        if (deviceToken !== undefined) {
          throw authFailure(
            GatewayErrorCodes.authDeviceTokenMismatch,
            'device_token_mismatch',
            'device token mismatch',
          );
        }
        throw authFailure(
          GatewayErrorCodes.authTokenMissing,
          'token_missing',
          'gateway token missing (set auth.token)',
        );
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
}

/**
 * Checks a `connect` request: its params, the protocol range, the role, and the credentials (gateway token,
 * device token, device signature). Throws HandshakeError, with the wire error and the close code, to refuse.
 */
export async function negotiateConnect(
  rawParams: unknown,
  context: HandshakeContext,
): Promise<NegotiatedConnection> {
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
          code: GatewayErrorCodes.protocolMismatch,
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
        details: { code: GatewayErrorCodes.roleUnsupported },
      },
      CloseCodes.policyViolation,
    );
  }
  const requestedScopes = params.scopes ?? [OperatorScopes.read, OperatorScopes.write];
  const authResult = await authenticate(params, role, requestedScopes, context);

  return {
    protocol: high,
    role,
    scopes: authResult.scopes,
    caps: new Set(params.caps),
    authMethod: authResult.method,
    ...(authResult.issued ? { issued: authResult.issued } : {}),
    clientInfo: {
      id: params.client.id,
      ...(params.client.version !== undefined ? { version: params.client.version } : {}),
      ...(params.client.platform !== undefined ? { platform: params.client.platform } : {}),
      ...(params.client.mode !== undefined ? { mode: params.client.mode } : {}),
      ...(params.client.displayName !== undefined ? { displayName: params.client.displayName } : {}),
      ...(params.client.instanceId !== undefined ? { instanceId: params.client.instanceId } : {}),
    },
  };
}

/** The `hello-ok` payload for an accepted connection. */
export function helloOkPayload(input: {
  negotiated: NegotiatedConnection;
  connId: string;
  serverVersion: string;
  methods: string[];
  events: string[];
  health: Record<string, unknown>;
  uptimeMs: number;
  noAuth: boolean;
  limits: { maxFrameBytes: number; maxBufferedBytes: number; tickIntervalMs: number };
}): Record<string, unknown> {
  const { negotiated, limits } = input;
  return {
    type: 'hello-ok',
    protocol: negotiated.protocol,
    server: { version: input.serverVersion, connId: input.connId },
    features: { methods: input.methods, events: input.events },
    snapshot: {
      presence: [],
      health: input.health,
      stateVersion: { presence: 0, health: 0 },
      uptimeMs: input.uptimeMs,
      sessionDefaults: {
        defaultAgentId,
        mainKey,
        mainSessionKey: mainSessionKey(defaultAgentId),
        scope: 'per-sender',
      },
      authMode: input.noAuth ? 'none' : 'token',
    },
    auth: {
      method: negotiated.authMethod,
      role: negotiated.role,
      scopes: negotiated.scopes,
      ...(negotiated.issued ?? {}),
    },
    policy: {
      maxPayload: limits.maxFrameBytes,
      maxBufferedBytes: limits.maxBufferedBytes,
      tickIntervalMs: limits.tickIntervalMs,
    },
  };
}
