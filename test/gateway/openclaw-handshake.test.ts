import { describe, expect, it } from 'vitest';
import { createMemoryDevicePairings } from '../../src/gateway/device-auth.js';
import {
  type HandshakeContext,
  HandshakeError,
  helloOkPayload,
  negotiateConnect,
} from '../../src/gateway/openclaw-handshake.js';
import { createManualClock } from '../../src/util/index.js';

const token = 'handshake-token-1';

function context(overrides: Partial<HandshakeContext['auth']> = {}): HandshakeContext {
  return {
    auth: {
      token,
      noAuth: false,
      deviceSecret: undefined,
      devices: createMemoryDevicePairings(),
      ...overrides,
    },
    nonce: 'nonce-1',
    clock: createManualClock(1_000),
    remoteIsLoopback: true,
  };
}

const params = (extra: Record<string, unknown> = {}) => ({
  minProtocol: 3,
  maxProtocol: 4,
  client: { id: 'openclaw-tui', version: '2026.9.6', platform: 'linux', mode: 'ui', instanceId: 'i-1' },
  role: 'operator',
  caps: ['tool-events', 'agent-kind'],
  auth: { token },
  ...extra,
});

async function refusal(promise: Promise<unknown>): Promise<HandshakeError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!(error instanceof HandshakeError)) throw new Error(`expected a HandshakeError, got ${String(error)}`);
  return error;
}

describe('OpenClaw handshake (negotiateConnect)', () => {
  it('accepts a token client: highest common protocol, known scopes only, caps and client info', async () => {
    const negotiated = await negotiateConnect(
      params({ scopes: ['operator.read', 'operator.write', 'operator.telepathy', 'operator.read'] }),
      context(),
    );
    expect(negotiated).toEqual({
      protocol: 4,
      role: 'operator',
      scopes: ['operator.read', 'operator.write'],
      caps: new Set(['tool-events', 'agent-kind']),
      authMethod: 'token',
      clientInfo: {
        id: 'openclaw-tui',
        version: '2026.9.6',
        platform: 'linux',
        mode: 'ui',
        instanceId: 'i-1',
      },
    });
    // Without scopes a client gets read and write; a v3-only client gets v3.
    const v3 = await negotiateConnect(params({ maxProtocol: 3 }), context());
    expect(v3).toMatchObject({ protocol: 3, scopes: ['operator.read', 'operator.write'] });
  });

  it('accepts any client of a --no-auth gateway as auth method none', async () => {
    const negotiated = await negotiateConnect(
      params({ auth: undefined }),
      context({ token: undefined, noAuth: true }),
    );
    expect(negotiated.authMethod).toBe('none');
  });

  it('refuses bad params, protocols, roles and credentials with stable detail codes and close codes', async () => {
    const invalid = await refusal(negotiateConnect({ minProtocol: 'x' }, context()));
    expect(invalid.wire.code).toBe('INVALID_REQUEST');
    expect(invalid.wire.message).toMatch(/^invalid connect params: /);
    expect(invalid.closeCode).toBe(1008);

    const mismatch = await refusal(negotiateConnect(params({ minProtocol: 5, maxProtocol: 6 }), context()));
    expect(mismatch.wire.details).toMatchObject({
      code: 'PROTOCOL_MISMATCH',
      minProtocol: 3,
      maxProtocol: 4,
    });
    expect(mismatch.closeCode).toBe(1002);

    const role = await refusal(negotiateConnect(params({ role: 'node' }), context()));
    expect(role.wire.details).toEqual({ code: 'ROLE_UNSUPPORTED' });

    const missing = await refusal(negotiateConnect(params({ auth: undefined }), context()));
    expect(missing.wire.details).toMatchObject({ code: 'AUTH_TOKEN_MISSING', authReason: 'token_missing' });
    const wrong = await refusal(negotiateConnect(params({ auth: { token: 'nope' } }), context()));
    expect(wrong.wire.details).toMatchObject({ code: 'AUTH_TOKEN_MISMATCH', authReason: 'token_mismatch' });
    expect(wrong.wire.message).toMatch(/^unauthorized: /);
    expect(wrong.closeCode).toBe(1008);
    const device = await refusal(negotiateConnect(params({ auth: { deviceToken: 'forged' } }), context()));
    expect(device.wire.details).toMatchObject({ code: 'AUTH_DEVICE_TOKEN_MISMATCH' });
  });

  it('builds hello-ok from the negotiated connection', async () => {
    const negotiated = await negotiateConnect(params({ scopes: ['operator.read'] }), context());
    const hello = helloOkPayload({
      negotiated,
      connId: 'conn-1',
      serverVersion: '0.1.0',
      methods: ['chat.send', 'health'],
      events: ['agent', 'chat'],
      health: { ok: true },
      uptimeMs: 42,
      noAuth: false,
      limits: { maxFrameBytes: 1_000, maxBufferedBytes: 2_000, tickIntervalMs: 30_000 },
    });
    expect(hello).toEqual({
      type: 'hello-ok',
      protocol: 4,
      server: { version: '0.1.0', connId: 'conn-1' },
      features: { methods: ['chat.send', 'health'], events: ['agent', 'chat'] },
      snapshot: {
        presence: [],
        health: { ok: true },
        stateVersion: { presence: 0, health: 0 },
        uptimeMs: 42,
        sessionDefaults: {
          defaultAgentId: 'main',
          mainKey: 'main',
          mainSessionKey: 'agent:main:main',
          scope: 'per-sender',
        },
        authMode: 'token',
      },
      auth: { method: 'token', role: 'operator', scopes: ['operator.read'] },
      policy: { maxPayload: 1_000, maxBufferedBytes: 2_000, tickIntervalMs: 30_000 },
    });
  });
});
