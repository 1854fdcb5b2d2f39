import { createHash, createHmac, createPublicKey, timingSafeEqual, verify } from 'node:crypto';
import { GatewayErrorCodes } from './error-codes.js';

/** Compares secrets in constant time, whatever their lengths. */
export function secretsEqual(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given, 'utf8').digest();
  const b = createHash('sha256').update(expected, 'utf8').digest();
  return timingSafeEqual(a, b);
}

export interface DeviceBlock {
  id: string;
  publicKey: string;
  signature: string;
  signedAt: number;
  nonce?: string | undefined;
}

export type DeviceAuthFailure = (typeof GatewayErrorCodes)[
  | 'deviceAuthNonceRequired'
  | 'deviceAuthNonceMismatch'
  | 'deviceAuthSignatureInvalid'
  | 'deviceAuthSignatureExpired'
  | 'deviceAuthDeviceIdMismatch'
  | 'deviceAuthPublicKeyInvalid'];

/** Clock skew tolerated between the device's `signedAt` and the gateway's clock. */
export const deviceSignatureMaxSkewMs = 10 * 60_000;

const ed25519SpkiPrefix = Buffer.from('302a300506032b6570032100', 'hex');

/** Lower-cases ASCII letters only, so every client runtime normalises metadata identically. */
function normalizeMetadata(value: string | undefined): string {
  const trimmed = value?.trim() ?? '';
  return trimmed.replace(/[A-Z]/g, (char) => String.fromCharCode(char.charCodeAt(0) + 32));
}

export interface DevicePayloadFields {
  deviceId: string;
  clientId: string;
  clientMode: string;
  role: string;
  scopes: ReadonlyArray<string>;
  signedAtMs: number;
  token: string;
  nonce: string;
  platform?: string | undefined;
  deviceFamily?: string | undefined;
}

/**
 * The strings OpenClaw devices sign: v3 is
 * `v3|deviceId|clientId|clientMode|role|scope,scope|signedAtMs|token|nonce|platform|deviceFamily`,
 * v2 the same without the last two fields.
 */
export function deviceAuthPayload(version: 'v2' | 'v3', fields: DevicePayloadFields): string {
  const parts = [
    version,
    fields.deviceId,
    fields.clientId,
    fields.clientMode,
    fields.role,
    fields.scopes.join(','),
    String(fields.signedAtMs),
    fields.token,
    fields.nonce,
  ];
  if (version === 'v3')
    parts.push(normalizeMetadata(fields.platform), normalizeMetadata(fields.deviceFamily));
  return parts.join('|');
}

export function deviceIdForPublicKey(rawPublicKey: Buffer): string {
  return createHash('sha256').update(rawPublicKey).digest('hex');
}

/**
 * Checks a `connect.params.device` block: the nonce is this connection's challenge, the signature is fresh,
 * the id is the SHA-256 of the raw Ed25519 public key, and the key signed a v3 (or v2) payload with one of
 * the tokens the client presented (or none).
 */
export function verifyDeviceBlock(input: {
  device: DeviceBlock;
  challengeNonce: string;
  nowMs: number;
  clientId: string;
  clientMode: string;
  role: string;
  scopes: ReadonlyArray<string>;
  tokens: ReadonlyArray<string>;
  platform?: string | undefined;
  deviceFamily?: string | undefined;
}): { ok: true } | { ok: false; code: DeviceAuthFailure; message: string } {
  const { device } = input;
  if (!device.nonce)
    return { ok: false, code: GatewayErrorCodes.deviceAuthNonceRequired, message: 'device nonce required' };
  if (!secretsEqual(device.nonce, input.challengeNonce)) {
    return {
      ok: false,
      code: GatewayErrorCodes.deviceAuthNonceMismatch,
      message: 'device nonce does not match the challenge',
    };
  }
  if (Math.abs(input.nowMs - device.signedAt) > deviceSignatureMaxSkewMs) {
    return {
      ok: false,
      code: GatewayErrorCodes.deviceAuthSignatureExpired,
      message: 'device signature expired',
    };
  }
  const raw = Buffer.from(device.publicKey, 'base64url');
  let key: ReturnType<typeof createPublicKey>;
  try {
    if (raw.length !== 32) throw new Error('not 32 bytes');
    key = createPublicKey({ key: Buffer.concat([ed25519SpkiPrefix, raw]), format: 'der', type: 'spki' });
  } catch {
    return {
      ok: false,
      code: GatewayErrorCodes.deviceAuthPublicKeyInvalid,
      message: 'device public key is not a raw Ed25519 key',
    };
  }
  if (deviceIdForPublicKey(raw) !== device.id) {
    return {
      ok: false,
      code: GatewayErrorCodes.deviceAuthDeviceIdMismatch,
      message: 'device id does not match its public key',
    };
  }
  const signature = Buffer.from(device.signature, 'base64url');
  const tokens = [...new Set([...input.tokens, ''])];
  for (const version of ['v3', 'v2'] as const) {
    for (const token of tokens) {
      const payload = deviceAuthPayload(version, {
        deviceId: device.id,
        clientId: input.clientId,
        clientMode: input.clientMode,
        role: input.role,
        scopes: input.scopes,
        signedAtMs: device.signedAt,
        token,
        nonce: device.nonce,
        platform: input.platform,
        deviceFamily: input.deviceFamily,
      });
      if (verify(null, Buffer.from(payload, 'utf8'), key, signature)) return { ok: true };
    }
  }
  return {
    ok: false,
    code: GatewayErrorCodes.deviceAuthSignatureInvalid,
    message: 'device signature invalid',
  };
}

/** A device the gateway has paired: the role and scopes its device token carries, for good. */
export interface PairedDevice {
  deviceId: string;
  role: string;
  scopes: string[];
  pairedAtMs: number;
}

/** Where pairings live; the runtime keeps them in the database so they survive restarts. */
export interface DevicePairings {
  get(deviceId: string): Promise<PairedDevice | undefined>;
  put(device: PairedDevice): Promise<void>;
}

/** Pairings for one process's lifetime (tests, embedded gateways without a store). */
export function createMemoryDevicePairings(): DevicePairings {
  const devices = new Map<string, PairedDevice>();
  return {
    get: async (deviceId) => devices.get(deviceId),
    put: async (device) => {
      devices.set(device.deviceId, { ...device, scopes: [...device.scopes] });
    },
  };
}

/**
 * Device tokens are derived, not stored: HMAC(secret, deviceId|role|scopes). The scopes are part of the MAC,
 * so a token only ever proves the pairing it was issued for; the pairing record says which scopes those
 * were. Tokens stay valid across restarts for as long as the secret (derived from the gateway token) does,
 * and rotating the gateway token revokes them all.
 */
export function issueDeviceToken(
  secret: Buffer,
  deviceId: string,
  role: string,
  scopes: ReadonlyArray<string>,
): string {
  return createHmac('sha256', secret)
    .update(`agentd-device-token|v2|${deviceId}|${role}|${[...scopes].sort().join(',')}`)
    .digest('base64url');
}

export function deviceTokenValid(secret: Buffer, device: PairedDevice, token: string): boolean {
  return secretsEqual(token, issueDeviceToken(secret, device.deviceId, device.role, device.scopes));
}

export function deviceTokenSecret(gatewayToken: string): Buffer {
  return createHash('sha256').update(`agentd-device-token-secret|${gatewayToken}`).digest();
}
